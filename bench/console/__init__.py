"""Console benchmark: the web console's assets compressed, and the time from submitting the
audit search to its first page on screen in headless chromium."""
