#!/usr/bin/env node
// berth needs Node 22.19 or newer (Node 20 is end-of-life). An older node runs this file only to
// hand over to the Node 24 that "make setup" installs into .node/ (scripts/ensure-node.sh), or to
// say what to do: dist/ is loaded after the check, so nothing of berth runs on the old one.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  const { existsSync } = await import('node:fs');
  const { spawn } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const local = fileURLToPath(new URL('../.node/bin/node', import.meta.url));
  if (!existsSync(local) || process.execPath === local) {
    process.stderr.write(
      `berth: needs Node 22.19 or newer, this is v${process.versions.node} (end-of-life); "make setup" installs Node 24 into .node/\n`,
    );
    process.exit(70);
  }
  const child = spawn(local, process.argv.slice(1), { stdio: 'inherit' });
  // The terminal sends Ctrl-C to both; a stop sent to this process alone is passed on.
  process.on('SIGINT', () => undefined);
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (!signal) process.exit(code ?? 1);
    process.removeAllListeners(signal); // end as it ended
    process.kill(process.pid, signal);
  });
} else {
  const { main } = await import('../dist/cli/berth.js');
  process.exitCode = await main(process.argv.slice(2), process.env, {
    out: (s) => process.stdout.write(s),
    err: (s) => process.stderr.write(s),
  });
}
