#!/usr/bin/env node
import { main } from '../dist/cli.js';

const code = await main(process.argv.slice(2), process.env, {
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
});
process.exitCode = code;
