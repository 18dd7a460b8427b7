"""The CLI's commands, one module each: `add_parser(sub)` adds its arguments to
the `jax-ladder` parser and `run(args)` carries it out (its exit status).
`jax_ladder.cli` wires them together and turns errors into exit statuses."""
