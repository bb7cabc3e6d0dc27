import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';

/** A process of the real-node cluster: started with its log in the run directory, stopped by its pid only. */
export interface Proc {
  name: string;
  child: ChildProcess;
  log: string;
  /** The log's last bytes, for an error. */
  tail(): string;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

export function startProc(dir: string, name: string, bin: string, args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const log = join(dir, `${name}.log`);
  const out = fs.openSync(log, 'a');
  const child = spawn(bin, args, { stdio: ['ignore', out, out], env: { ...process.env, ...env } });
  fs.closeSync(out);
  const tail = () => {
    try {
      return fs.readFileSync(log, 'utf8').slice(-3000);
    } catch {
      return '';
    }
  };
  return {
    name,
    child,
    log,
    tail,
    async stop(signal = 'SIGTERM', graceMs = 10_000) {
      if (exited(child)) return;
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await gone;
      clearTimeout(timer);
    },
  };
}

/** Poll `probe` until it holds; fail with the process's log if it exits or the deadline passes. */
export async function waitFor(what: string, deadlineMs: number, probe: () => Promise<boolean>, proc?: Proc): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (proc && exited(proc.child)) throw new Error(`${what}: ${proc.name} exited (${proc.child.exitCode}): ${proc.tail()}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`${what} did not happen in ${deadlineMs} ms${proc ? `: ${proc.tail()}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
