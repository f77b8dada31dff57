"""What every layer uses: the one family of errors with their exit statuses (`errors`),
quantities as people type and read them (`quantities`: sizes, durations, rates), and how
^C and SIGTERM become exceptions that unwind and undo (`interrupts`)."""
