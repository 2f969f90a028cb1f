"""The development server `./dev run` serves the portal with (Django's `runserver`), answering
without Nagle's delay; the test suite's live server uses the same server class."""
