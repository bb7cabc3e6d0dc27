import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { isBerthError } from '../base/errors.js';
import { createContainerInspector, type ContainerInspector } from '../launch/docker/inspect.js';
import { createBerth, type Berth } from '../main.js';
import { workspaceIdOf } from '../store/sessions.js';
import { workspaceOf } from '../store/workspaces.js';
import { CONFINEMENT_CHECKS, judge } from './verify/confinement.js';
import { readHostFacts } from './verify/host-facts.js';
import { GVISOR_PROC_VERSION, parseProbe, PROBE_SCRIPT, type ProbeFacts } from './verify/probe.js';
import type { VerifyCheck } from './verify/verify-check.js';
import { watchLauncher } from './verify/watched-launcher.js';

export type { VerifyCheck } from './verify/verify-check.js';

const A = 'verify:alice';
const B = 'verify:bob';

/**
 * `berth verify`: this host, attacked live. A throw-away project under the real config and
 * engine, attacked the ways the integration tests do — from real containers as real tenants —
 * one line per check; any escape is a non-zero exit. Then the kernel's side of every container
 * it made: what each said from inside (seccomp, LSM label, namespaces, cgroup limits) and what
 * the engine says it holds, against the plan it was created from. Everything it made is removed.
 */
export async function runVerify(
  given: Berth,
  onCheck: (c: VerifyCheck) => void = () => undefined,
  inspector: ContainerInspector = createContainerInspector(),
  opts: { runtime?: string } = {},
): Promise<VerifyCheck[]> {
  // The same home and engine, through an engine that records each container's plan and inspect.
  const watched = watchLauncher(given.launcher, inspector);
  const berth = createBerth({ home: given.home, launcher: watched.launcher, images: given.images, logLevel: given.logger.level });
  const host = readHostFacts();
  /** What each container said from inside, by container id. */
  const inside = new Map<string, ProbeFacts>();
  const project = `verify-${randomBytes(4).toString('hex')}`;
  const secret = `verify-secret-${randomBytes(8).toString('hex')}`;
  const marker = `BERTH_VERIFY_HOST_${randomBytes(4).toString('hex').toUpperCase()}`;
  const checks: VerifyCheck[] = [];
  const record = (c: VerifyCheck) => {
    checks.push(c);
    onCheck(c);
  };
  /** One check: "held" says the boundary held; a thrown error is an error, never a pass. */
  const check = async (name: string, fn: () => Promise<{ held: boolean; detail: string }>) => {
    try {
      const r = await fn();
      record({ name, status: r.held ? 'ok' : 'escape', detail: r.detail });
    } catch (err) {
      record({ name, status: 'error', detail: isBerthError(err) ? err.toLine() : String(err).slice(0, 300) });
    }
  };
  /** Every verify run first reports its confinement from inside (on stderr; the check reads stdout). */
  const run = async (tenant: string, message: string, level: 'low' | 'medium' | 'high' = 'low') => {
    const o = await berth.runner.run({ project, tenantKey: tenant, message: PROBE_SCRIPT + message, level });
    const facts = parseProbe(o.stderr);
    if (facts) inside.set(o.containerId, facts);
    return o;
  };

  process.env[marker] = 'must-not-reach-a-container';
  try {
    berth.store.create({
      name: project,
      workspace_isolation: true,
      protected_paths: ['AGENTS.md'],
      ...(opts.runtime ? { runtime: opts.runtime } : {}),
    });
    const p = berth.store.get(project);
    const agents = join(p.paths.dir, 'AGENTS.md');
    const before = fs.readFileSync(agents, 'utf8');
    const alice = await run(A, `echo ${secret} > secret.txt; echo made`);
    if (alice.stdout.trim() !== 'made') throw new Error(`the first run did not work: ${alice.stderr.slice(0, 200)}`);

    await check("neighbour's workspace", async () => {
      const o = await run(
        B,
        `cat ../*/secret.txt /workspace/../*/secret.txt 2>/dev/null; grep -rs ${secret} / --include=secret.txt 2>/dev/null | head -1; echo done`,
      );
      return {
        held: !o.stdout.includes(secret),
        detail: o.stdout.includes(secret) ? "bob read alice's file" : "bob cannot reach alice's files by any path",
      };
    });
    await check('protected path', async () => {
      const o = await run(
        B,
        'echo pwned > AGENTS.md 2>&1; rm -f AGENTS.md 2>&1; mv AGENTS.md x 2>&1; ln -sf /etc/passwd AGENTS.md 2>&1; echo tried',
      );
      const after = fs.readFileSync(agents, 'utf8');
      const inside = (await run(B, 'cat AGENTS.md')).stdout;
      const held = after === before && inside === before;
      return {
        held,
        detail: held
          ? 'write, delete, rename and relink all refused; the host file is unchanged'
          : `AGENTS.md changed (${o.stdout.slice(0, 100)})`,
      };
    });
    await check('symlinked mount source', async () => {
      const ws = workspaceOf(p, workspaceIdOf(berth.secret, project, B)).dir;
      fs.rmSync(ws, { recursive: true, force: true });
      fs.symlinkSync('/etc', ws);
      try {
        const o = await run(B, 'ls /workspace; test -e /workspace/passwd && echo HOST-ETC-MOUNTED || echo not-etc').catch(
          (err: unknown) => ({ stdout: `refused: ${isBerthError(err) ? err.code : String(err)}` }),
        );
        const held = !o.stdout.includes('HOST-ETC-MOUNTED') && fs.lstatSync('/etc').isDirectory();
        return {
          held,
          detail: held ? 'a workspace replaced by a link to /etc is never mounted' : 'the link was followed: /etc was mounted',
        };
      } finally {
        if (fs.lstatSync(ws, { throwIfNoEntry: false })?.isSymbolicLink()) fs.unlinkSync(ws);
      }
    });
    await check('network', async () => {
      const low = await run(A, 'ls /sys/class/net | tr "\\n" " "; ip route | grep -v " dev lo " | wc -l', 'low');
      const high = await run(A, 'ls /sys/class/net | tr "\\n" " "; ip route | grep -v " dev lo " | wc -l', 'high');
      const seen = (o: { stdout: string }) => o.stdout.replace(/\s+/g, ' ').trim();
      const held = seen(low) === 'lo 0' && seen(high) === 'lo 0';
      return {
        held,
        detail: held
          ? "only lo, no route, at low and at high (egress only through berth's proxy)"
          : `interfaces and routes: low "${seen(low)}", high "${seen(high)}"`,
      };
    });
    await check('host environment', async () => {
      const o = await run(A, 'env; cat /proc/1/environ 2>/dev/null | tr "\\0" "\\n"');
      return {
        held: !o.stdout.includes(marker),
        detail: o.stdout.includes(marker)
          ? "berth's own environment reached the container"
          : "berth's environment does not reach containers",
      };
    });
    await check('privileges', async () => {
      const o = await run(
        A,
        `id -u; grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status | tr -s "\\t" " "; grep -q "^${GVISOR_PROC_VERSION}" /proc/version && echo under-gVisor; touch /root-write 2>/dev/null && echo ROOT-WRITABLE || echo ro`,
      );
      // gVisor's kernel reports no NoNewPrivs line: its sentry's host process holds it (and the capabilities check reads the engine's record).
      const noNewPrivs = /NoNewPrivs: 1/.test(o.stdout) || (opts.runtime === 'runsc' && o.stdout.includes('under-gVisor'));
      const held = /^10001\n/.test(o.stdout) && /CapEff: 0+\n/.test(o.stdout) && noNewPrivs && o.stdout.trim().endsWith('ro');
      return {
        held,
        detail: held ? 'uid 10001, no capabilities, no new privileges, read-only root' : o.stdout.replace(/\n/g, ' ').slice(0, 200),
      };
    });
    await check('Docker socket', async () => {
      const o = await run(A, 'ls -la /var/run/docker.sock /run/docker.sock /run/containerd 2>&1 | grep -v "No such" ; echo end');
      const held = o.stdout.trim() === 'end';
      return { held, detail: held ? 'no engine socket in the container' : `found: ${o.stdout.slice(0, 200)}` };
    });
    await check('gateway escapes', async () => {
      const tools = berth.fileTools.forCaller({ project, tenantKey: B });
      const folderId = workspaceIdOf(berth.secret, project, B);
      const aliceId = workspaceIdOf(berth.secret, project, A);
      const attempts: Array<[string, () => unknown]> = [
        ['../ out of the folder', () => tools.read({ folderId, scope: 'private', path: '../../../../etc/passwd' })],
        ["alice's folder", () => tools.read({ folderId: aliceId, scope: 'private', path: 'secret.txt' })],
        ['absolute path', () => tools.read({ folderId, scope: 'private', path: '/etc/passwd' })],
      ];
      const leaked: string[] = [];
      for (const [what, attempt] of attempts) {
        try {
          const got = JSON.stringify(attempt());
          if (got.includes('root:') || got.includes(secret)) leaked.push(what);
        } catch {
          // refused: what should happen
        }
      }
      return {
        held: leaked.length === 0,
        detail: leaked.length ? `read through: ${leaked.join(', ')}` : "../, another tenant's folder and absolute paths are refused",
      };
    });
    await check('model key', async () => {
      const keys = Object.values(berth.config.models).map((m) => m.api_key);
      if (keys.length === 0) return { held: true, detail: 'no model keys configured (nothing to leak)' };
      const o = await run(A, 'env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n"');
      const leaked = keys.some((k) => o.stdout.includes(k));
      return { held: !leaked, detail: leaked ? 'a model key is readable in a container' : 'no model key in any container process' };
    });
  } catch (err) {
    record({ name: 'setup', status: 'error', detail: isBerthError(err) ? err.toLine() : String(err).slice(0, 300) });
  } finally {
    delete process.env[marker];
  }
  try {
    const containers = (await watched.created()).map((c) => ({ ...c, inside: inside.get(c.id) }));
    for (const c of CONFINEMENT_CHECKS) record(judge(c, containers, host));
  } finally {
    await cleanUp(berth, project);
  }
  return checks;
}

async function cleanUp(berth: Berth, project: string): Promise<void> {
  try {
    await berth.runner.removeContainers(project);
    const trashed = await berth.store.trash(project);
    fs.rmSync(trashed, { recursive: true, force: true });
  } catch {
    // nothing was made, or it is already gone
  }
}
