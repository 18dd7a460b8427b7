from jax_ladder.cli import main

raise SystemExit(main())
