// The shell tool's policy; the parts live beside it, from the table (bins.ts) up to the check (check.ts).
export { SHELL_BINS } from './bins.js';
export { checkShellCommand, type SharedRoot, sharedAreaOf } from './check.js';
export { deny } from './deny.js';
export { collectPathIntent } from './intent.js';
export type { PathIntent } from './path-intent.js';
export { splitCommand } from './split-command.js';
