# The two commands: "make run" (set up, then the demo) and "make test" (set up, then every test).
.PHONY: setup run test bench build clean

setup:
	@./scripts/setup.sh

run: setup
	@node bin/berth.js demo

test: setup
	@npm run --silent typecheck
	@npx vitest run

bench: setup
	@npm run --silent bench

build:
	@npm run --silent build

clean:
	rm -rf dist node_modules
