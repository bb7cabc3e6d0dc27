import type { ContractCommands } from './launcher-contract.js';

/** The contract's commands in berth's shell image (busybox). */
export const SHELL_COMMANDS: ContractCommands = {
  cat: (path) => ['cat', path],
  // The text and path are the script's arguments, never pasted into it.
  write: (path, text) => ['sh', '-c', 'printf %s "$1" > "$2"', 'sh', text, path],
  sleep: (seconds) => ['sleep', String(seconds)],
  flood: () => ['yes', 'berth-flood'],
  background: () => ['sh', '-c', 'sleep 1000 &'],
  // test/fixtures/ipc-probe.c, built into tenant a's workspace (buildIpcProbe): one 1 MiB SysV segment.
  ipc: () => ['/workspace/ipc-probe', 'shm', '1'],
  hold: (mib) => ['dd', 'if=/dev/zero', 'of=/tmp/held', 'bs=1048576', `count=${mib}`],
  exit: (code) => ['sh', '-c', `exit ${code}`],
};
