"""The people: tenders and operators, their skills, time off and usual week, their links and
pages, invitations, calendars and hours.

Nothing is imported here: each module is imported by name."""
