from bench.hostile import main

raise SystemExit(main())
