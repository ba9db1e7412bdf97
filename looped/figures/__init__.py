"""Every figure: public plotting helpers, readability checks, and each study's figures as pure functions of its results."""
