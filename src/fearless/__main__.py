"""`python -m fearless` runs the `fearless` command."""

from fearless.cli.main import main

raise SystemExit(main())
