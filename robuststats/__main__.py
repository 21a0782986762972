from __future__ import annotations

from robuststats.cli import main

raise SystemExit(main())
