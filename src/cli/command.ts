import type { ParseArgsConfig } from 'node:util';
import { BerthError } from '../base/errors.js';
import type { Berth } from '../main.js';

export type Out = { out: (s: string) => void; err: (s: string) => void };

export interface Command {
  /** Its synopsis line and a line or two on what it does: `berth <command> --help`. */
  usage: string;
  options: ParseArgsConfig['options'];
  /** Log level when BERTH_LOG_LEVEL is unset. */
  logLevel?: string;
  /** A server (serve, bridge): its metrics include the process's own, and sessions' containers stay warm. */
  longRunning?: boolean;
  run(berth: () => Berth, values: Record<string, unknown>, positionals: string[], io: Out, env: NodeJS.ProcessEnv): Promise<number>;
}

export function need(positionals: string[], count: number, what: string): void {
  if (positionals.length < count) throw new BerthError('USAGE', `missing ${what}`, { hint: 'see "berth --help"' });
  if (positionals.length > count)
    throw new BerthError('USAGE', `unexpected argument "${positionals[count]}"`, { hint: 'see "berth --help"' });
}
