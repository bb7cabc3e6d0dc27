import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import {
  adoptPlanOf,
  bindsInOrder,
  blankPlanOf,
  freshLayoutOf,
  mayClaim,
  personBindsOf,
  poolable,
  poolShape,
  poolWayOf,
  POOLED,
  type PoolFacts,
} from '../../src/plan/pool.js';
import { planRun, type PlanInput } from '../../src/plan/run-plan.js';

/** The pre-started pool's planning (plan/pool.ts): which plans share pool containers, and what those are made with. */
const config = BerthConfigSchema.parse({});

function input(tenant: string, meta: Record<string, unknown> = {}, person = false): PlanInput {
  return {
    ...(person
      ? {
          home: { dir: `/h/.berth/projects/bot/homes/s-${tenant}` },
          runDir: `/h/.berth/sockets/run-${tenant}`,
          memory: { dir: '/h/projects/bot/memory' },
        }
      : {}),
    config,
    project: {
      dir: '/h/projects/bot',
      metadataFile: '/h/projects/bot/metadata.json',
      metadata: ProjectMetadataSchema.parse({ name: 'bot', workspace_isolation: true, ...meta }),
    },
    workspace: { id: `ws-${tenant}`, dir: `/h/projects/bot/workspaces/ws-${tenant}`, isolated: meta.workspace_isolation !== false },
    protectedSnapshot: { dir: '/h/.berth/projects/bot/protected/g1', entries: [{ path: 'AGENTS.md', kind: 'file' }] },
    run: { id: `run-${tenant}`, level: 'medium', message: `hello from ${tenant}`, session: `s-${tenant}` },
    installation: 'inst1',
  };
}

describe('poolShape: which plans one pool container can serve', () => {
  it("two people's first messages in one project at one level share a shape; their workspaces, runs and messages do not matter", () => {
    const alice = planRun(input('alice'));
    const bob = planRun(input('bob'));
    expect(alice.mounts).not.toEqual(bob.mounts);
    expect(poolShape(alice)).toBe(poolShape(bob));
  });

  it('anything fixed at container creation makes another shape: limits, image, protected paths, project, relays', () => {
    const base = planRun(input('alice'));
    const others = [
      planRun(input('alice', { limits: { pids: 512 } })),
      { ...base, keepAlive: ['berth-bridge', 'relay', '41400=/run/berth/model.sock', '--', 'berth-bridge', 'idle'] },
      planRun(input('alice', { limits: { memory_mb: 1024 } })),
      planRun(input('alice', { image: 'berth/other:latest' })),
      {
        ...base,
        mounts: [
          ...base.mounts,
          { type: 'bind' as const, source: '/h/.berth/projects/bot/protected/g1/RULES.md', target: '/workspace/RULES.md', readOnly: true },
        ],
      },
      { ...base, labels: { ...base.labels, 'berth.project': 'other' } },
      { ...base, mounts: base.mounts.map((m, i) => (i === 0 ? { ...m, readOnly: true } : m)) },
    ];
    for (const [i, plan] of others.entries()) expect(poolShape(plan), `change ${i}`).not.toBe(poolShape(base));
  });
});

describe('blankPlanOf: what a pool container is started with', () => {
  it("every bind source is berth's blank stand-in at the same target; no environment; the per-tenant labels say pool", () => {
    const plan = planRun(input('alice'));
    const blank = blankPlanOf(plan, (i) => `/h/.berth/cache/pool/x/b${i}`);
    const binds = plan.mounts.filter((m) => m.type === 'bind');
    expect(blank.mounts.filter((m) => m.type === 'bind')).toEqual(binds.map((m, i) => ({ ...m, source: `/h/.berth/cache/pool/x/b${i}` })));
    expect(blank.mounts.filter((m) => m.type === 'tmpfs')).toEqual(plan.mounts.filter((m) => m.type === 'tmpfs'));
    expect(JSON.stringify(blank)).not.toMatch(/alice/);
    expect(blank.env).toEqual({});
    expect(blank.labels['berth.workspace']).toBe(POOLED);
    expect(blank.labels['berth.run']).toBe(POOLED);
    expect(blank.labels['berth.session']).toBe(POOLED);
    expect(blank.labels['berth.project']).toBe('bot');
    expect(blank.argv).toEqual(plan.keepAlive);
    // The same shape as the plan it stands in for.
    expect(poolShape(blank)).toBe(poolShape(plan));
  });

  it('mounts are attached parents first (the protected file lands on the workspace just attached)', () => {
    const plan = planRun(input('alice'));
    const order = bindsInOrder(plan).map((m) => m.target);
    expect(order[0]).toBe('/workspace');
    for (const [i, target] of order.entries()) {
      for (const later of order.slice(i + 1)) expect(target.startsWith(`${later}/`)).toBe(false);
    }
  });
});

describe('poolable', () => {
  it('isolated workspaces only: a shared-mode container sees the whole project and is started as before', () => {
    expect(poolable(planRun(input('alice')))).toBe(true);
    expect(poolable(planRun(input('alice', { workspace_isolation: false })))).toBe(false);
  });
});

describe('poolWayOf: the one place that decides whether, and how, a plan is pooled', () => {
  const plan = planRun(input('alice', { protected_paths: ['AGENTS.md'] }, true));
  const facts = (f: Partial<PoolFacts> = {}): PoolFacts => ({
    lateMounts: false,
    adoptBinds: true,
    ownFilesystem: false,
    otherFilesystem: [],
    ...f,
  });
  it.each([
    ['late mounts (runc): attach, whatever adopt could do', facts({ lateMounts: true, ownFilesystem: true }), 'attach'],
    ['no late mounts, a launcher that keeps renamed directories (gVisor on this host): adopt', facts(), 'adopt'],
    ['neither: no pool', facts({ adoptBinds: false }), undefined],
    ['adopt, but the workspace is a filesystem of its own (disk_quotas: loop): no pool', facts({ ownFilesystem: true }), undefined],
    [
      "adopt, but a person directory is on another filesystem than the pool's: no pool",
      facts({ otherFilesystem: ['/home/agent'] }),
      undefined,
    ],
  ])('%s', (_, f, way) => {
    expect(poolWayOf(plan, f).way).toBe(way);
  });

  it('a shared-mode plan is never pooled, either way; nor one with a mount below the home or run directory (adopt)', () => {
    const shared = planRun(input('alice', { workspace_isolation: false }, true));
    expect(poolWayOf(shared, facts({ lateMounts: true })).way).toBeUndefined();
    expect(poolWayOf(shared, facts()).way).toBeUndefined();
    const below = {
      ...plan,
      mounts: [...plan.mounts, { type: 'bind' as const, source: '/x', target: '/home/agent/.ssh', readOnly: true }],
    };
    expect(poolWayOf(below, facts())).toEqual({ why: "a mount below a person's directory: /home/agent/.ssh" });
    expect(poolWayOf(below, facts({ lateMounts: true })).way).toBe('attach');
  });

  it('a claim may adopt only for a new person; attach serves any new session', () => {
    expect([mayClaim('adopt', { isNew: true }), mayClaim('adopt', { isNew: false }), mayClaim('adopt', undefined)]).toEqual([
      true,
      false,
      false,
    ]);
    expect([mayClaim('attach', { isNew: false }), mayClaim('attach', undefined)]).toEqual([true, true]);
  });
});

describe('adopt: shapes and fresh directories', () => {
  const alice = planRun(input('alice', { protected_paths: ['AGENTS.md'] }, true));
  const bob = planRun(input('bob', { protected_paths: ['AGENTS.md'] }, true));

  it("two people share an adopt shape; another protected snapshot, memory or other project-wide source is another shape, and adopt's shapes are not attach's", () => {
    expect(poolShape(alice, 'adopt')).toBe(poolShape(bob, 'adopt'));
    expect(poolShape(alice, 'adopt')).not.toBe(poolShape(alice, 'attach'));
    const newSnapshot = {
      ...alice,
      mounts: alice.mounts.map((m) =>
        m.type === 'bind' && m.target === '/workspace/AGENTS.md' ? { ...m, source: '/h/.berth/projects/bot/protected/g2/AGENTS.md' } : m,
      ),
    };
    expect(poolShape(newSnapshot, 'attach')).toBe(poolShape(alice, 'attach')); // attached at the claim: no matter
    expect(poolShape(newSnapshot, 'adopt')).not.toBe(poolShape(alice, 'adopt')); // bound at the start: another shape
    const otherMountpoints = { ...alice, prepare: { ...alice.prepare, mountpoints: [{ path: 'AGENTS.md', kind: 'dir' as const }] } };
    expect(poolShape(otherMountpoints, 'adopt')).not.toBe(poolShape(alice, 'adopt'));
  });

  it("the fresh directories stand at the person binds alone (workspace, home, run directory), the workspace holding the protected paths' mount points", () => {
    expect(personBindsOf(alice).map((m) => [m.target, m.source])).toEqual([
      ['/workspace', '/h/projects/bot/workspaces/ws-alice'],
      ['/home/agent', '/h/.berth/projects/bot/homes/s-alice'],
      ['/run/berth', '/h/.berth/sockets/run-alice'],
    ]);
    expect(freshLayoutOf(alice)).toEqual({
      dirs: [
        { target: '/workspace', name: 'workspace', mode: 0o755, tenantOwned: true },
        { target: '/home/agent', name: 'home', mode: 0o700, tenantOwned: true },
        { target: '/run/berth', name: 'run', mode: 0o755, tenantOwned: false },
      ],
      mountpoints: [{ path: 'AGENTS.md', kind: 'file' }],
    });
  });

  it("a container's plan: its fresh directories at the person binds, the project-wide sources the plan's own, nothing of a tenant", () => {
    const blank = blankPlanOf(alice, (_, m) =>
      m.type === 'bind' && !['/workspace', '/home/agent', '/run/berth'].includes(m.target) ? m.source : '',
    );
    const fresh = {
      '/workspace': '/h/.berth/adopt/o/t/workspace',
      '/home/agent': '/h/.berth/adopt/o/t/home',
      '/run/berth': '/h/.berth/adopt/o/t/run',
    };
    const started = adoptPlanOf(blank, fresh);
    const binds = Object.fromEntries(started.mounts.flatMap((m) => (m.type === 'bind' ? [[m.target, m.source]] : [])));
    expect(binds).toEqual({
      ...fresh,
      '/memory': '/h/projects/bot/memory',
      '/workspace/AGENTS.md': '/h/.berth/projects/bot/protected/g1/AGENTS.md',
    });
    expect(JSON.stringify(started)).not.toMatch(/alice/);
    expect(started.env).toEqual({});
    expect(poolShape(started, 'attach')).toBe(poolShape(alice, 'attach'));
    expect(() => adoptPlanOf(blank, { '/workspace': '/x' })).toThrow(/no fresh directory for \/(run\/berth|home\/agent)/);
  });
});
