"""Cover requests (issue 19): a tender who cannot work a shift of a sent week asks, the
others are offered it, the first to take it gets it (:mod:`.machine`)."""
