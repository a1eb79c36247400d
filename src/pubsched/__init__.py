"""The pub scheduler: the seed pub-scheduler-v2 as a small application on rowstate."""
