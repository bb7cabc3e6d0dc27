import { pino, type Logger } from 'pino';
import { startBridges, type RunningBridges } from '../../src/bridges/start.js';
import { homePaths } from '../../src/config/home.js';
import type { FakeSignalCli } from '../fakes/signal-cli.js';
import type { TestHome } from '../helpers.js';

/** A logger whose JSON lines land in `lines` (the tests read what berth logged, never what it printed). */
export function capturingLogger<T>(lines: T[]): Logger {
  return pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as T) });
}

/** berth's bridges on a test home, as serve starts them, with fast reconnects. */
export function startTestBridges(h: TestHome, logger: Logger = pino({ level: 'silent' })): RunningBridges {
  return startBridges({
    admin: h.berth.admin,
    config: () => h.berth.config,
    logger,
    stateDir: homePaths(h.home).stateDir,
    backoffMs: { min: 50, max: 200 },
    approvals: h.berth.approvals,
  });
}

/** The same, once the fake signal-cli has them connected. */
export async function startSignalBridges(
  h: TestHome,
  fake: FakeSignalCli,
  logger: Logger = pino({ level: 'silent' }),
): Promise<RunningBridges> {
  const bridges = startTestBridges(h, logger);
  await fake.waitForClients(1, 10_000);
  return bridges;
}

/** Bridges first (they hold the home's inbox and the fake's connection), then the home, then the fake. */
export async function stopBridgeRig(rig: { bridges?: RunningBridges; h?: TestHome; fake?: { close(): Promise<void> } }): Promise<void> {
  await rig.bridges?.stop();
  await rig.h?.[Symbol.asyncDispose]();
  await rig.fake?.close();
}
