import fs from 'node:fs';
import Docker from 'dockerode';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDockerLauncher } from '../../src/launch/docker/launcher.js';
import { installationId } from '../../src/main.js';
import { POOLED } from '../../src/plan/pool.js';
import { execFileSync, spawn } from 'node:child_process';
import { tryOwnerLock } from '../../src/fs/lock.js';
import { processIdentity } from '../../src/fs/process-identity.js';
import { workspaceIdOf } from '../../src/store/sessions.js';
import { loadOrCreateSecret } from '../../src/store/secret.js';
import { RUNTIME, testHome, WRITE_REFUSED, type TestHome } from '../helpers.js';
import { pidAt } from '../helpers/pid-at.js';

/**
 * The pre-started pool on the real engine (runs/prestart-pool.ts): a container started before its
 * tenant is known takes the tenant's workspace by late mounts (native/berth-mount.c) and is from
 * then on that tenant's warm container; the pool refills. Under gVisor a sandbox does not see
 * a mount made after its start over a bind's root (its gofer holds that directory open): there the
 * pool stays empty and runs start as before.
 */
let h: TestHome;
const run = (user: string, message: string, opts: { session?: string; level?: 'low' | 'medium' | 'high' } = {}) =>
  h.berth.runner.run({ project: 'p', tenantKey: user, message, sessionId: opts.session, level: opts.level });

/** Project p's waiting pool containers (labelled POOLED, never claimed by a message yet, and in the pool: its gauge counts them). */
async function waiting(claimed: Set<string>): Promise<string[]> {
  const gauge = (await h.berth.metrics.registry.getSingleMetric('berth_pool_containers')?.get())?.values[0]?.value ?? 0;
  // The gauge counts every project's; project p's are returned.
  const pooled = (await h.berth.runner.listContainers()).filter(
    (c) => c.workspace === POOLED && c.state === 'running' && !claimed.has(c.id),
  );
  return pooled.length === gauge ? pooled.filter((c) => c.project === 'p').map((c) => c.id) : [];
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(() => {
  h = testHome({ warm: true, pool: undefined, config: 'runs: { warm_idle_seconds: 60, pool: 1, pool_max: 1 }\n' }); // a fixed size: which one waits is known
  h.create({ name: 'p', workspace_isolation: true, limits: { timeout_seconds: 10 } });
  fs.writeFileSync(join(h.berth.store.get('p').paths.dir, 'RULES.md'), 'house rules\n');
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe.runIf(RUNTIME !== 'runsc')('the pre-started pool (runc)', () => {
  const claimed = new Set<string>();

  it("a new person's first message runs in a container started before they wrote: their workspace alone, mounted into it", async () => {
    await h.berth.admin.updateProject('p', { protected_paths: ['RULES.md'] });
    // The first session of this shape starts its container as before, and teaches the pool the shape.
    const alice = await run('web:alice', 'echo alice-was-here > mine.txt; ls /workspace');
    expect(alice.exitCode, alice.stderr).toBe(0);
    claimed.add(alice.containerId);
    const [ready] = await until('a pre-started container', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids : undefined;
    });
    const { Mounts, Config } = await new Docker().getContainer(ready as string).inspect();
    // Started with berth's blank stand-ins: nothing of any tenant, no environment of one.
    expect(Mounts.filter((m) => m.Type === 'bind').every((m) => m.Source.includes('/pool/'))).toBe(true);
    expect((Config.Env ?? []).filter((e) => e.startsWith('BERTH_'))).toEqual([]);

    const bob = await run(
      'web:bob',
      'id -u; pwd; echo "$BERTH_RUN"; ls -a /workspace; cat RULES.md; (echo x > RULES.md) 2>&1 || echo refused; echo bob > mine.txt; cat mine.txt',
    );
    expect(bob.exitCode, bob.stderr).toBe(0);
    expect(bob.containerId).toBe(ready);
    expect(bob.warm).toBe(false);
    claimed.add(bob.containerId);
    const lines = bob.stdout.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['10001', '/workspace', bob.runId]);
    expect(bob.stdout).not.toContain('alice-was-here');
    expect(bob.stdout).toContain('house rules');
    expect(bob.stdout).toMatch(/Read-only file system/);
    expect(lines.at(-1)).toBe('bob');
    // His file is in his workspace on the host, and alice's is untouched.
    const workspaces = h.berth.store.get('p').paths.workspacesDir;
    const files = fs.readdirSync(workspaces).map((id) => fs.readFileSync(join(workspaces, id, 'mine.txt'), 'utf8').trim());
    expect(files.sort()).toEqual(['alice-was-here', 'bob']);
  });

  it("the claimed container is the person's warm container from then on; the pool refills with a new one", async () => {
    const again = await run('web:bob', 'cat mine.txt');
    expect(again.warm).toBe(true);
    expect(claimed.has(again.containerId)).toBe(true);
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids[0] : undefined;
    });
    expect(claimed.has(next)).toBe(false);
    const carol = await run('web:carol', 'ls /workspace; cat mine.txt 2>&1 || echo none');
    expect(carol.containerId).toBe(next);
    claimed.add(carol.containerId);
    expect(carol.stdout).toContain('none');
    expect(carol.stdout).not.toMatch(/alice-was-here|bob/);
  });

  it('a claim creates and starts no container: the message runs in the one that waited', async () => {
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids[0] : undefined;
    });
    const dave = await run('web:dave', 'true');
    expect(dave.containerId).toBe(next);
    // How fast a claim is (~10-20 ms of attach here) is bench/first-message.ts's to measure.
    const created = (await new Docker().listContainers({ all: true, filters: { label: ['berth.project=p'] } })).filter(
      (c) => c.Id === dave.containerId,
    );
    expect(created[0]?.Names[0]).toMatch(/^\/berth-claimed\./);
  });
});

/** A container's mount table as its first process sees it. */
const mountTable = async (id: string) =>
  fs.readFileSync(`/proc/${(await new Docker().getContainer(id).inspect()).State.Pid}/mountinfo`, 'utf8');

describe.runIf(RUNTIME !== 'runsc')('the pre-started pool against PID reuse and swapped mounts (outside attack 4, H1)', () => {
  it("waiting containers removed behind berth's back, their numbers taken by another tenant's container: the next new person gets a fresh container, and no foreign mount appears anywhere", async () => {
    // The victim's container has the same mount targets as p's (the report's two projects both protect a file).
    h.create({ name: 'vp', workspace_isolation: true, limits: { timeout_seconds: 10 } });
    fs.writeFileSync(join(h.berth.store.get('vp').paths.dir, 'RULES.md'), 'victim rules\n');
    await h.berth.admin.updateProject('vp', { protected_paths: ['RULES.md'] });
    const victim = await h.berth.runner.run({
      project: 'vp',
      tenantKey: 'web:victim',
      sessionId: 's-v1',
      message: 'echo VICTIM-PRIVATE > victim-file.txt',
    });
    expect(victim.exitCode, victim.stderr).toBe(0);
    const victimPid = (await new Docker().getContainer(victim.containerId).inspect()).State.Pid;
    const victimTable = await mountTable(victim.containerId);
    const pooled = await until('a pre-started container', async () => {
      const ids = await waiting(new Set((await h.berth.runner.listContainers('p')).filter((c) => c.workspace !== POOLED).map((c) => c.id)));
      return ids.length ? ids : undefined;
    });
    const pids = await Promise.all(pooled.map(async (id) => (await new Docker().getContainer(id).inspect()).State.Pid));
    // Another process removes them (an operator's docker rm, another berth); processes of the victim's container take their numbers.
    await Promise.all(pooled.map((id) => new Docker().getContainer(id).remove({ force: true })));
    const squatters = await Promise.all(pids.map((pid) => pidAt(pid, victimPid)));
    try {
      const newcomer = await run('web:newcomer', 'echo NEWCOMER > mine.txt; cat mine.txt; ls /workspace');
      expect(newcomer.exitCode, newcomer.stderr).toBe(0);
      expect(newcomer.stdout).toContain('NEWCOMER');
      expect(newcomer.stdout).not.toContain('victim-file.txt');
      expect(pooled).not.toContain(newcomer.containerId);
      // The victim's container shows its own mounts alone; its next message sees its own workspace.
      expect(await mountTable(victim.containerId)).toBe(victimTable);
      const again = await h.berth.runner.run({
        project: 'vp',
        tenantKey: 'web:victim',
        sessionId: 's-v1',
        message: 'ls /workspace; cat victim-file.txt',
      });
      expect(again.stdout).toContain('VICTIM-PRIVATE');
      expect(again.stdout).not.toContain('mine.txt');
      expect(again.warm).toBe(true);
      const pWorkspaces = h.berth.store.get('p').paths.workspacesDir;
      expect(await mountTable(again.containerId)).not.toContain(pWorkspaces);
    } finally {
      for (const s of squatters) s.kill();
    }
  });

  it('a claimed container is told from a waiting one by any process: its engine name carries the workspace and run it took', async () => {
    const next = await until('the pool refilled', async () => {
      const ids = await waiting(new Set((await h.berth.runner.listContainers('p')).filter((c) => c.workspace !== POOLED).map((c) => c.id)));
      return ids.length ? ids[0] : undefined;
    });
    const erin = await run('web:erin', 'true');
    expect(erin.containerId).toBe(next);
    const listed = await new Docker().listContainers({ filters: { id: [erin.containerId] } });
    expect(listed[0]?.Names).toEqual([expect.stringMatching(new RegExp(`^/berth-claimed\\.[0-9a-f]{32}\\.${erin.runId}$`))]);
    // A launcher with no memory of the claim (another process) lists it with erin's workspace, not as waiting.
    const other = await createDockerLauncher().listManaged({ installation: installationId(h.home), project: 'p' });
    const seen = other.find((c) => c.id === erin.containerId);
    expect(seen?.workspace).toMatch(/^[0-9a-f]{32}$/);
    expect(seen?.run).toBe(erin.runId);
  });

  it("a warm container whose workspace mount was swapped behind berth's back is not used again: the next message gets a new container with its own workspace", async () => {
    const first = await run('web:frank', 'echo FRANK > frank.txt', { session: 's-frank' });
    expect(first.exitCode, first.stderr).toBe(0);
    const pid = (await new Docker().getContainer(first.containerId).inspect()).State.Pid;
    // Something else at /workspace (here an empty filesystem, mounted by root from the host's side).
    execFileSync('nsenter', ['-t', String(pid), '-m', 'mount', '-t', 'tmpfs', 'none', '/workspace']);
    const second = await run('web:frank', 'ls /workspace; cat frank.txt', { session: 's-frank' });
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.stdout).toContain('FRANK');
    expect(second.warm).toBe(false);
    expect(second.containerId).not.toBe(first.containerId);
  });
});

/** A waiting sandbox's bind sources by target, as the engine started it. */
const sourcesOf = async (id: string) =>
  Object.fromEntries(
    ((await new Docker().getContainer(id).inspect()).Mounts as Array<{ Type: string; Source: string; Destination: string }>)
      .filter((m) => m.Type === 'bind')
      .map((m) => [m.Destination, m.Source]),
  );
const PERSON = ['/workspace', '/home/agent', '/run/berth'];
const inode = (path: string) => fs.statSync(path).ino;
/** Every person directory of project p on the host now (workspaces, agent homes, run directories): path → inode. */
function personDirs(): Map<string, number> {
  const p = h.berth.store.get('p').paths;
  const dirs = [p.workspacesDir, join(p.stateDir, 'homes'), join(h.home, '.berth', 'sockets')];
  return new Map(dirs.flatMap((d) => (fs.existsSync(d) ? fs.readdirSync(d).map((n) => [join(d, n), inode(join(d, n))] as const) : [])));
}

describe.runIf(RUNTIME === 'runsc')('the pre-started pool under gVisor (adopt)', () => {
  const claimed = new Set<string>();
  /** Every fresh directory a waiting sandbox was seen with. */
  const freshSeen = new Set<string>();
  const nextWaiting = () =>
    until('a pre-started sandbox', async () => {
      const ids = await waiting(claimed);
      return ids.length ? ids[0] : undefined;
    });

  it("a new person's first message runs in a sandbox started before they wrote, on fresh directories of berth's renamed to theirs", async () => {
    await h.berth.admin.updateProject('p', { protected_paths: ['RULES.md'] });
    const alice = await run('web:alice', 'echo alice-was-here > mine.txt; ls /workspace');
    expect(alice.exitCode, alice.stderr).toBe(0);
    expect(alice.record.receipt?.policy.start).toBe('cold'); // the shape's first run teaches the pool
    claimed.add(alice.containerId);
    const ready = await nextWaiting();
    const { Config } = await new Docker().getContainer(ready).inspect();
    expect((Config.Env ?? []).filter((e) => e.startsWith('BERTH_'))).toEqual([]);
    // Its person binds are fresh directories of its own in berth's private state, outside every project's tree.
    const sources = await sourcesOf(ready);
    const adoptDir = join(h.home, '.berth', 'adopt');
    for (const target of PERSON) {
      expect(sources[target]?.startsWith(`${adoptDir}/`), target).toBe(true);
      expect(sources[target]?.startsWith(h.berth.store.get('p').paths.dir)).toBe(false);
      freshSeen.add(sources[target] as string);
    }
    expect(fs.readdirSync(sources['/workspace'] as string)).toEqual(['RULES.md']); // the protected path's mount point, nothing else
    expect(fs.readdirSync(sources['/home/agent'] as string)).toEqual([]);
    const freshInode = inode(sources['/workspace'] as string);

    // Its run directory's sockets were moved in at the claim: the file tools answer through them.
    const hello = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`;
    const bob = await run(
      'web:bob',
      `(printf '%s\\n' '${hello}'; sleep 1) | berth-bridge "$BERTH_GATEWAY" | head -c 200; echo; id -u; pwd; echo "$BERTH_RUN"; ls -a /workspace; cat RULES.md; (echo x > RULES.md) 2>&1 || echo refused; echo bob > mine.txt; cat mine.txt`,
    );
    expect(bob.exitCode, bob.stderr).toBe(0);
    expect(bob.containerId).toBe(ready);
    expect(bob.warm).toBe(false);
    claimed.add(bob.containerId);
    const lines = bob.stdout.split('\n').filter(Boolean);
    expect(lines[0]).toContain('"serverInfo"');
    expect(lines.slice(1, 4)).toEqual(['10001', '/workspace', bob.runId]);
    expect(bob.stdout).not.toContain('alice-was-here');
    expect(bob.stdout).toContain('house rules');
    expect(bob.stdout).toMatch(WRITE_REFUSED);
    expect(lines.at(-1)).toBe('bob');
    // The receipt observed for the pooled sandbox is its plan's.
    expect(bob.record.receipt?.policy.start).toBe('pool');
    expect(bob.record.receipt?.violations).toEqual([]);
    // His workspace is the sandbox's fresh directory, renamed: same inode, and the fresh path is gone (never handed out again).
    const workspaces = h.berth.store.get('p').paths.workspacesDir;
    const bobsWs = bob.workspaceRoot;
    expect(inode(bobsWs)).toBe(freshInode);
    expect(fs.existsSync(sources['/workspace'] as string)).toBe(false);
    // What a cold start's workspace holds, his holds (his seed and mount point moved in).
    const alicesWs = alice.workspaceRoot;
    expect(fs.readdirSync(bobsWs).sort()).toEqual(fs.readdirSync(alicesWs).sort());
    const files = fs.readdirSync(workspaces).map((id) => fs.readFileSync(join(workspaces, id, 'mine.txt'), 'utf8').trim());
    expect(files.sort()).toEqual(['alice-was-here', 'bob']);
  });

  it("the claimed sandbox is the person's warm container from then on; the next waits on new fresh directories, never any person's", async () => {
    const again = await run('web:bob', 'cat mine.txt');
    expect(again.warm).toBe(true);
    expect(claimed.has(again.containerId)).toBe(true);
    expect(again.stdout.trim()).toBe('bob');
    // Any process lists it as his: its engine name carries his workspace and run.
    const listed = await new Docker().listContainers({ filters: { id: [again.containerId] } });
    expect(listed[0]?.Names).toEqual([expect.stringMatching(/^\/berth-claimed\.[0-9a-f]{32}\.[0-9a-z]+$/)]);
    const next = await nextWaiting();
    const sources = await sourcesOf(next);
    const persons = personDirs();
    for (const target of PERSON) {
      const fresh = sources[target] as string;
      expect(freshSeen.has(fresh), `${target} fresh again`).toBe(false);
      freshSeen.add(fresh);
      // Not any person's directory, by path or by inode.
      expect(persons.has(fresh)).toBe(false);
      expect([...persons.values()]).not.toContain(inode(fresh));
    }
    const carol = await run('web:carol', 'ls -a /workspace; cat mine.txt 2>&1 || echo none; ls -a $HOME');
    expect(carol.containerId).toBe(next);
    claimed.add(carol.containerId);
    expect(carol.stdout).toContain('none');
    expect(carol.stdout).not.toMatch(/alice-was-here|bob/);
  });

  it('a claim that cannot rename the fresh directories into place gives way: the sandbox goes, the run starts its own, nothing of the person is lost', async () => {
    const ready = await nextWaiting();
    const root = join((await sourcesOf(ready))['/workspace'] as string, '..');
    execFileSync('chattr', ['+i', root]); // nothing may be made or renamed in it: the claim fails at its first step
    try {
      const dave = await run('web:dave', 'ls -a /workspace; echo dave > mine.txt; cat mine.txt');
      expect(dave.exitCode, dave.stderr).toBe(0);
      expect(dave.containerId).not.toBe(ready);
      claimed.add(dave.containerId);
      expect(dave.record.receipt?.policy.start).toBe('cold');
      expect(dave.stdout).toContain('RULES.md');
      expect(dave.stdout.trim().split('\n').at(-1)).toBe('dave');
      expect(fs.readFileSync(join(dave.workspaceRoot, 'mine.txt'), 'utf8')).toBe('dave\n');
      await until('the failed sandbox removed', async () =>
        (await h.berth.runner.listContainers('p')).some((c) => c.id === ready) ? undefined : true,
      );
    } finally {
      execFileSync('chattr', ['-i', root]);
    }
  });

  it("a new workspace another berth process is making (and may adopt) is waited for: this one's run neither makes it nor adopts it meanwhile", async () => {
    await nextWaiting();
    // Another berth process (the CLI beside serve) took the workspace's adopt lock: here a live process that is not this one.
    const other = spawn('sleep', ['60']);
    try {
      const ws = workspaceIdOf(loadOrCreateSecret(join(h.home, '.berth', 'secret')), 'p', 'web:frank');
      const lockDir = join(h.berth.store.get('p').paths.stateDir, 'adopting');
      fs.mkdirSync(lockDir, { recursive: true });
      const lock = tryOwnerLock(join(lockDir, ws), { owner: processIdentity(other.pid) as string });
      expect('release' in lock).toBe(true);
      let settled = false;
      const frank = run('web:frank', 'echo frank > mine.txt').finally(() => (settled = true));
      await new Promise((r) => setTimeout(r, 500));
      expect(settled).toBe(false);
      expect(fs.existsSync(join(h.berth.store.get('p').paths.workspacesDir, ws))).toBe(false);
      if ('release' in lock) lock.release(); // the other process's claim is done
      const done = await frank;
      expect(done.exitCode, done.stderr).toBe(0);
      expect(done.record.receipt?.policy.start).toBe('cold'); // this run did not take the lock: no adopt
      claimed.add(done.containerId);
    } finally {
      other.kill();
    }
  });

  it('a second session of an existing tenant never gets an adopted sandbox: it starts its own on the same workspace, which is never renamed', async () => {
    const ready = await nextWaiting();
    const bobsWs = (await run('web:bob', 'true')).workspaceRoot;
    const before = inode(bobsWs);
    const second = await run('web:bob', 'cat mine.txt; echo second > two.txt', { session: 's-bob-2' });
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.containerId).not.toBe(ready);
    expect(claimed.has(second.containerId)).toBe(false);
    claimed.add(second.containerId);
    expect(second.record.receipt?.policy.start).toBe('cold');
    expect(second.stdout.trim()).toBe('bob');
    expect(await waiting(claimed)).toContain(ready);
    expect(inode(bobsWs)).toBe(before);
    // His first session's sandbox still holds the very directory the second one wrote into.
    const first = await run('web:bob', 'cat two.txt');
    expect(first.warm).toBe(true);
    expect(first.stdout.trim()).toBe('second');
  });
});
