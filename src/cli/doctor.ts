import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { mountHelper } from '../launch/docker/late-mounts.js';
import {
  checkBridgeConsumers,
  checkBridges,
  checkWebChat,
  checkRoutes,
  checkModels,
  checkModelUpstreams,
  checkTranscription,
} from './doctor-outbound.js';
import { checkOidc } from './doctor-oidc.js';
import type { ProjectMetadata } from '../config/metadata.js';
import { join } from 'node:path';
import { loadBerthConfig, type BerthConfig } from '../config/berth-config.js';
import { loopQuotaSupport } from '../fs/loop-quota.js';
import { admissionLimitsOf } from '../config/runs.js';
import { homePaths } from '../config/home.js';
import { isBerthError } from '../base/errors.js';
import { installationId, type Berth } from '../main.js';
import { planPathProbe } from '../plan/probe-plan.js';
import { nodeSupport } from '../base/node-support.js';
import { newRunId } from '../runs/runner.js';
import { imageFor } from '../plan/run-plan.js';
import { listWorkflows } from '../workflows/run.js';
import { projectGrantsOf } from '../config/grants.js';
import { retiredVolumes } from '../launch/kubernetes/volumes.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';
export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
}

/** Known runc container escapes and the releases that fix them. */
const RUNC_2025 = 'CVE-2025-31133, CVE-2025-52565, CVE-2025-52881';

function versionAtLeast(v: number[], min: number[]): boolean {
  for (let i = 0; i < min.length; i++) {
    const a = v[i] ?? 0;
    const b = min[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}

/**
 * Pure: the engine, and whether its version is one a busy bot can lock up. Docker 20.10 before
 * 20.10.27 deadlocks in libnetwork when two containers' network clean-ups overlap
 * (moby/moby#46661): every later start, removal and listing hangs until dockerd restarts.
 */
export function assessEngine(info: { name: string; version: string; apiVersion: string }): Check {
  const detail = `${info.name} (API ${info.apiVersion})`;
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(info.version);
  if (info.name.startsWith('Docker') && m && Number(m[1]) === 20 && Number(m[2]) === 10 && Number(m[3]) < 27) {
    return {
      name: 'engine',
      status: 'warn',
      detail: `${detail} can lock up under container churn (a libnetwork deadlock, moby/moby#46661, fixed in 20.10.27; berth's soak hit it after 29 minutes of about 2 container starts and removals a second); for a busy bot use Docker 20.10.27 or later`,
    };
  }
  return { name: 'engine', status: 'ok', detail };
}

/**
 * Pure: what a runc version means for berth. "sharedMounts" says whether some project mounts
 * one rw tree into several tenants' containers (workspace_isolation false), the condition the
 * 2025 escapes need besides a hostile image.
 */
export function assessRunc(version: string, sharedProjects: string[]): Check {
  const match = /^(\d+)\.(\d+)\.(\d+)(?:-rc\.?(\d+))?/.exec(version);
  if (!match) return { name: 'runc', status: 'warn', detail: `unrecognised runc version "${version}"` };
  const v = [Number(match[1]), Number(match[2]), Number(match[3])];
  // Debian bookworm's 1.1.5+ds1-1+deb12uN carries the CVE-2024-21626 fix (upstream 1.1.12).
  const debianPatched = /\+deb12u\d+/.test(version) && versionAtLeast(v, [1, 1, 5]);
  if (!versionAtLeast(v, [1, 1, 12]) && !debianPatched) {
    return {
      name: 'runc',
      status: 'fail',
      detail: `runc ${version} lacks the CVE-2024-21626 fix (leaky fds: any container can escape); upgrade runc`,
    };
  }
  const fixed2025 =
    (v[0] === 1 && v[1] === 2 && versionAtLeast(v, [1, 2, 8])) ||
    (v[0] === 1 && v[1] === 3 && versionAtLeast(v, [1, 3, 3])) ||
    versionAtLeast(v, [1, 4, 0]);
  if (fixed2025) return { name: 'runc', status: 'ok', detail: `runc ${version}: known escapes fixed` };
  const detail = `runc ${version} is not fixed for ${RUNC_2025} (fixed in 1.2.8 / 1.3.3 / 1.4.0); they need a hostile image or a mount shared with a starting container`;
  return sharedProjects.length > 0
    ? {
        name: 'runc',
        status: 'fail',
        detail: `${detail}, and ${sharedProjects.length === 1 ? 'project' : 'projects'} ${sharedProjects.map((p) => `"${p}"`).join(', ')} (workspace_isolation false) share one: upgrade runc, or isolate ${sharedProjects.length === 1 ? 'it' : 'them'} (berth project update <name> --isolation)`,
      }
    : { name: 'runc', status: 'warn', detail: `${detail}; every project here is isolated and images are yours, so the risk is contained` };
}

/** Every runtime a project may run under: its own and its levels'. */
function projectRuntimes(meta: ProjectMetadata): string[] {
  return [...new Set([meta.runtime, ...Object.values(meta.level_runtimes)])];
}

/**
 * Pure: the runtimes the engine has (with versions), and each one berth.yaml offers or a project
 * picks that the engine lacks (a project's runs would be refused with RUNTIME_MISSING).
 */
export function assessRuntimes(
  engine: Array<{ name: string; version?: string }>,
  offered: string[],
  projects: Array<{ name: string; metadata: ProjectMetadata }>,
): Check[] {
  const has = new Set(engine.map((r) => r.name));
  const checks: Check[] = [
    {
      name: 'runtimes',
      status: 'ok',
      detail: engine.map((r) => `${r.name}${r.version ? ` (${r.version})` : ''}`).join(', ') || 'none reported',
    },
  ];
  for (const name of offered.filter((r) => !has.has(r))) {
    checks.push({
      name: `runtime ${name}`,
      status: 'warn',
      detail: `berth.yaml offers it but the engine has no such runtime${name === 'runsc' ? ' (docs/security.md, "Stronger isolation: gVisor")' : ''}`,
    });
  }
  for (const p of projects) {
    for (const runtime of projectRuntimes(p.metadata)) {
      if (!offered.includes(runtime))
        checks.push({
          name: `project ${p.name}`,
          status: 'fail',
          detail: `runtime "${runtime}" is not in berth.yaml's runtimes (${offered.join(', ')}): its runs are refused`,
        });
      else if (!has.has(runtime))
        checks.push({
          name: `project ${p.name}`,
          status: 'fail',
          detail: `runtime "${runtime}" is not registered with the engine: its runs are refused`,
        });
    }
  }
  return checks;
}

export async function runDoctor(berth: Berth): Promise<Check[]> {
  const node = nodeSupport(process.version, new Date());
  const checks: Check[] = [{ name: 'node', status: node.ok ? 'ok' : 'warn', detail: node.detail }];
  try {
    loadBerthConfig(homePaths(berth.home).configFile, berth.home);
    checks.push({
      name: 'config',
      status: 'ok',
      detail: fs.existsSync(homePaths(berth.home).configFile) ? 'berth.yaml valid' : 'no berth.yaml (defaults)',
    });
  } catch (err) {
    checks.push({ name: 'config', status: 'fail', detail: isBerthError(err) ? err.toLine() : String(err) });
  }

  const projects: Array<{ name: string; image: string; isolated: boolean; metadata: ProjectMetadata }> = [];
  let projectProblems = 0;
  for (const name of berth.store.names()) {
    try {
      const p = berth.store.get(name);
      projects.push({ name, image: imageFor(p.metadata, berth.config), isolated: p.metadata.workspace_isolation, metadata: p.metadata });
      if (p.metadata.protected_paths.length > 0 && !p.snapshot) {
        projectProblems++;
        checks.push({
          name: `project ${name}`,
          status: 'fail',
          detail: `protected paths have no snapshot; run "berth project update ${name}"`,
        });
      }
    } catch (err) {
      projectProblems++;
      checks.push({ name: `project ${name}`, status: 'fail', detail: isBerthError(err) ? err.toLine() : String(err) });
    }
  }
  if (projectProblems === 0) checks.push({ name: 'projects', status: 'ok', detail: `${projects.length} project(s) valid` });
  checks.push(...checkRwAreas(berth));
  checks.push(describeRuns(berth.config));
  checks.push(...checkModels(berth.config, projects));
  checks.push(...(await checkModelUpstreams(berth.config)), ...(await checkTranscription(berth.config)));
  checks.push(...(await checkOidc(berth.config, berth.store.names())));
  const valid = new Set(projects.map((p) => p.name));
  checks.push(
    ...checkRoutes(berth.config, new Map(berth.store.names().map((n) => [n, valid.has(n) ? listWorkflows(berth.store.get(n)) : []]))),
  );
  checks.push(...checkGrants(berth.config, berth.store.names()));
  const retired = checkRetiredVolumes(berth);
  if (retired) checks.push(retired);
  checks.push(checkWebChat(berth.config), ...(await checkBridges(berth.config)));
  checks.push(...checkBridgeConsumers(berth.config, homePaths(berth.home).stateDir));

  try {
    const info = await berth.launcher.info();
    checks.push(assessEngine(info));
    if (!info.securityOptions.some((o) => o.includes('seccomp'))) {
      checks.push({ name: 'seccomp', status: 'warn', detail: 'the engine runs without a seccomp profile' });
    }
    const runc = info.runtimes.find((r) => r.name === 'runc');
    if (runc)
      checks.push(
        assessRunc(
          runc.version ?? 'unknown',
          projects.filter((p) => !p.isolated && projectRuntimes(p.metadata).includes('runc')).map((p) => p.name),
        ),
      );
    checks.push(...assessRuntimes(info.runtimes, berth.config.runtimes, projects));
    checks.push(assessDisk(berth.home, info.rootDir, berth.config.disk_quotas));
    const wanted = new Set([berth.config.images.shell, ...projects.map((p) => p.image)]);
    for (const image of wanted) {
      const present = await berth.images.exists(image);
      checks.push(
        present
          ? { name: `image ${image}`, status: 'ok', detail: 'present' }
          : { name: `image ${image}`, status: 'fail', detail: 'missing; build it with "berth images build"' },
      );
    }
    if (await berth.images.exists(berth.config.images.shell)) checks.push(await probeHostPaths(berth));
    checks.push(await checkPool(berth));
  } catch (err) {
    checks.push({ name: 'engine', status: 'fail', detail: isBerthError(err) ? err.toLine() : String(err) });
  }
  return checks;
}

/**
 * Which bound holds tenant writes: with disk_quotas: loop, the kernel (an ext4 image per
 * workspace); else a per-run check (limits.disk_mb and limits.files, about once a second). Louder
 * when berth's home shares its filesystem with the engine's data or is nearly full.
 */
export function assessDisk(home: string, engineRoot: string, quotas: BerthConfig['disk_quotas'], support = loopQuotaSupport()): Check {
  const fsOf = (p: string) => {
    try {
      return fs.statSync(p).dev;
    } catch {
      return undefined;
    }
  };
  const st = fs.statfsSync(home);
  const free = st.bavail * st.bsize;
  const pct = Math.round((100 * st.bavail) / Math.max(1, st.blocks));
  const shared = fsOf(home) !== undefined && fsOf(home) === fsOf(engineRoot);
  const gib = `${Math.round(free / 2 ** 30)} GiB`;
  if (quotas === 'loop') {
    if (!support.ok)
      return {
        name: 'disk quotas',
        status: 'fail',
        detail: `disk_quotas: loop, but ${support.detail}: runs of isolated projects will fail`,
      };
    const detail = `disk_quotas: loop (the kernel bounds each isolated workspace at limits.disk_mb); ${gib} (${pct}%) free where berth's home is`;
    return { name: 'disk quotas', status: pct < 10 ? 'warn' : 'ok', detail };
  }
  const bound = `disk_quotas: off, so tenant writes are bounded by limits.disk_mb and limits.files per run, not by the kernel${support.ok ? ' (this host can do disk_quotas: loop)' : ''}`;
  if (pct < 10) return { name: 'disk quotas', status: 'warn', detail: `${gib} (${pct}%) free where berth's home is; ${bound}` };
  if (shared)
    return {
      name: 'disk quotas',
      status: 'warn',
      detail: `berth's home shares a filesystem with the engine's data (${engineRoot}); ${bound}`,
    };
  return { name: 'disk quotas', status: 'ok', detail: `${gib} free; ${bound}` };
}

/**
 * Whether `runs.pool` can do its work here: containers that take their mounts late (runc, crun;
 * root; the helper built), or sandboxes that take fresh directories renamed into place (gVisor:
 * a new person's first message only).
 */
async function checkPool(berth: Berth): Promise<Check> {
  const size = berth.config.runs.pool;
  if (size === 0) return { name: 'pool', status: 'ok', detail: 'runs.pool: 0 (a new session starts its container)' };
  const caps = await berth.launcher.capabilities();
  const late = caps.runtimes.filter((r) => caps.lateMounts(r));
  const adopt = caps.runtimes.filter((r) => !caps.lateMounts(r) && caps.adoptBinds?.(r) === true);
  const adopting = adopt.length ? `; on ${adopt.join(', ')} for a new person's first message (fresh directories renamed into place)` : '';
  if (late.length || adopt.length)
    return {
      name: 'pool',
      status: 'ok',
      detail: `${size} pre-started per shape under serve, for isolated projects${late.length ? ` on ${late.join(', ')}` : ''}${adopting}`,
    };
  let why = 'the engine is not on this host, or no runtime here is runc or crun';
  if (process.getuid?.() !== 0) why = 'berth is not root (attaching mounts needs it)';
  else {
    try {
      mountHelper(homePaths(berth.home).cacheDir);
    } catch (err) {
      why = isBerthError(err) ? err.toLine() : String(err);
    }
  }
  return {
    name: 'pool',
    status: 'warn',
    detail: `runs.pool is ${size}, but no container here can take its mounts late (${why}): a new person's first message starts a container`,
  };
}

/**
 * Pure: every grant in berth.yaml (a secret's, a shared area's) names a project that exists. One
 * that does not is a FAIL: a project made under that name (by anyone who may create projects)
 * would hold it from its first run. `project delete` takes a project's grants with it; these are
 * hand edits, or left by a berth from before that.
 */
export function checkGrants(config: BerthConfig, projects: readonly string[]): Check[] {
  const exists = new Set(projects);
  const grants = projectGrantsOf(config);
  const missing = grants.filter((g) => !exists.has(g.project));
  if (!missing.length)
    return [{ name: 'grants', status: 'ok', detail: `${grants.length} grant(s) in berth.yaml, each to a project that exists` }];
  return missing.map((g) => {
    const secret = /^secrets\.([^.]+)\./.exec(g.field)?.[1];
    const undo = secret
      ? `berth secret revoke ${secret} --project ${g.project}`
      : `berth project revoke ${g.project} ${g.what.replace(/^shared area "(.*)"$/, '$1')}, or remove ${g.field} from berth.yaml`;
    return {
      name: `grant ${g.field}`,
      status: 'fail',
      detail: `grants ${g.what} to project "${g.project}", which does not exist: a project made under that name would hold it; ${undo}`,
    };
  });
}

/** launcher: kubernetes: cluster volumes of deleted sessions and projects that wait for the cluster to delete them (never mounted again meanwhile). */
function checkRetiredVolumes(berth: Berth): Check | undefined {
  const { waiting } = retiredVolumes(homePaths(berth.home).stateDir, 0);
  if (!waiting) return undefined;
  return {
    name: 'cluster volumes',
    status: 'warn',
    detail: `${waiting} volume(s) of deleted sessions or projects are not deleted on the cluster yet (it did not answer, or berth runs on Docker now); none is mounted again. berth retries at each session or project delete, and every few minutes while it serves`,
  };
}

/** What admission control and warm containers will do with this berth.yaml on this host. */
export function describeRuns(config: BerthConfig): Check {
  const l = admissionLimitsOf(config);
  const { warm_idle_seconds: idle, warm_max: max, drain_seconds: drain } = config.runs;
  const warm = idle > 0 && max > 0 ? `sessions stay warm ${idle} s (at most ${max}) under serve` : 'no warm containers';
  return {
    name: 'runs',
    status: 'ok',
    detail: `${l.global} at once (${l.perProject} per project, ${l.perTenant} per tenant), ${l.queue} may wait; ${warm}; SIGTERM drains for ${drain} s`,
  };
}

/** A read-write grant is only useful if the agent user can write the area. */
function checkRwAreas(berth: Berth): Check[] {
  const { uid, gid } = berth.config.agent_user;
  const checks: Check[] = [];
  for (const [project, settings] of Object.entries(berth.config.projects)) {
    for (const g of settings.shared_access) {
      if (typeof g === 'string' || g.mode !== 'rw') continue;
      const path = berth.config.shared_workspaces[g.name] as string;
      const st = fs.statSync(path);
      const writable = (st.uid === uid && st.mode & 0o200) || (st.gid === gid && st.mode & 0o020) || st.mode & 0o002;
      if (!writable) {
        checks.push({
          name: `area ${g.name}`,
          status: 'warn',
          detail: `granted rw to ${project}, but ${path} is not writable by the agent user ${uid}:${gid} (chown or chmod it)`,
        });
      }
    }
  }
  return checks;
}

/** Do the engine and berth see the same files at the same paths? (berth in a container) */
async function probeHostPaths(berth: Berth): Promise<Check> {
  const dir = join(berth.home, '.berth', 'probe');
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const file = `path-probe-${randomBytes(6).toString('hex')}`;
  const token = randomBytes(12).toString('hex');
  fs.writeFileSync(join(dir, file), token, { mode: 0o644 });
  try {
    const plan = planPathProbe({ config: berth.config, dir, file, installation: installationId(berth.home), runId: newRunId() });
    const result = await berth.launcher.run(plan);
    return result.stdout === token
      ? { name: 'host paths', status: 'ok', detail: `the engine sees ${berth.home} as berth does` }
      : {
          name: 'host paths',
          status: 'fail',
          detail: `the engine does not see ${berth.home} as berth does: run berth with its home at the same absolute path on the host and in its container (see docs/production.md, "berth in a container")`,
        };
  } catch (err) {
    return { name: 'host paths', status: 'fail', detail: isBerthError(err) ? err.toLine() : String(err) };
  } finally {
    fs.rmSync(join(dir, file), { force: true });
  }
}
