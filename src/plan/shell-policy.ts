// The shell tool's policy; the parts live in ./shell/, from the table (bins.ts) up to the check (check.ts).
export { SHELL_BINS } from './shell/bins.js';
export { checkShellCommand, type SharedRoot, sharedAreaOf, WORKSPACE_ROOT } from './shell/check.js';
export { deny } from './shell/deny.js';
export { collectPathIntent } from './shell/intent.js';
export type { PathIntent } from './shell/path-intent.js';
export { splitCommand } from './shell/split-command.js';
