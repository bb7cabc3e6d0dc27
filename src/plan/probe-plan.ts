import type { BerthConfig } from '../config/berth-config.js';
import { DEFAULT_RUNTIME } from '../config/runtimes.js';
import { LABELS } from './labels.js';
import { RELAY_BIN } from './outbound.js';
import { CONTAINER_PATH, IPC_SYSCTLS, type RunPlan } from './run-plan.js';

/**
 * A container that reads a file berth just wrote under its home. If berth runs where its paths
 * are not the engine's (inside a container without the home at the same absolute path), the
 * engine mounts something else or nothing, and the probe says so before any tenant run does.
 */
export function planPathProbe(input: { config: BerthConfig; dir: string; file: string; installation: string; runId: string }): RunPlan {
  return {
    image: input.config.images.shell,
    runtime: DEFAULT_RUNTIME,
    argv: ['cat', `/probe/${input.file}`],
    exec: ['cat', `/probe/${input.file}`],
    keepAlive: [RELAY_BIN, 'idle'],
    cwd: '/',
    user: `${input.config.agent_user.uid}:${input.config.agent_user.gid}`,
    mounts: [{ type: 'bind', source: input.dir, target: '/probe', readOnly: true }],
    env: { PATH: CONTAINER_PATH },
    network: 'none',
    sockets: [],
    readOnlyRootfs: true,
    sysctls: { ...IPC_SYSCTLS },
    limits: { memoryBytes: 32 * 1024 * 1024, nanoCpus: 5e8, pids: 16, timeoutMs: 20_000, outputBytes: 4096 },
    labels: {
      [LABELS.managed]: 'true',
      [LABELS.installation]: input.installation,
      [LABELS.project]: '',
      [LABELS.workspace]: '',
      [LABELS.run]: input.runId,
    },
    prepare: { rwRoot: input.dir, rwRootPath: [], files: [], dirs: [], mountpoints: [] },
    warnings: [],
  };
}
