import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema } from '../../src/config/metadata.js';
import { bindsInOrder, blankPlanOf, poolable, poolShape, POOLED } from '../../src/plan/pool.js';
import { planRun, type PlanInput } from '../../src/plan/run-plan.js';

/** The pre-started pool's planning (plan/pool.ts): which plans share pool containers, and what those are made with. */
const config = BerthConfigSchema.parse({});

function input(tenant: string, meta: Record<string, unknown> = {}): PlanInput {
  return {
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
