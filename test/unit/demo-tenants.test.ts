import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_PROJECT, DEMO_TENANTS, ensureDemoProject, runDemo } from '../../src/cli/demo.js';
import type { RunPlan } from '../../src/plan/run-plan.js';
import { createBerth, type Berth } from '../../src/main.js';
import { createFakeLauncher } from '../helpers/fake-launcher.js';
import { createMemoryImages } from '../helpers/memory-images.js';

/**
 * First hour, round 4, step 7: `make run`, alice writes notes.txt in her chat, then `make demo`
 * overwrote it (the demo ran as web:alice and web:bob in the served home) and left web:bob's
 * session at level low. Here on the in-memory launcher: what each demo run mounts, and whose
 * sessions it opens. test/integration/cli.test.ts replays it on the real engine.
 */
const disposers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const dispose of disposers.splice(0)) await dispose();
});

function demoHome(): { berth: Berth; plans: RunPlan[] } {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-demo-tenants-')));
  const fake = createFakeLauncher();
  const plans: RunPlan[] = [];
  const run = fake.run.bind(fake);
  fake.run = (plan, opts) => (plans.push(plan), run(plan, opts));
  const berth = createBerth({ home, logLevel: 'silent', launcher: fake, images: createMemoryImages() });
  disposers.push(async () => {
    await berth.runner.reapLeftovers();
    fs.rmSync(home, { recursive: true, force: true });
  });
  return { berth, plans };
}

const io = (sink: string[]) => ({ out: (s: string) => void sink.push(s), err: (s: string) => void sink.push(s) });

describe('berth demo in the served home', () => {
  it("runs as its own tenants and says so: alice's note and bob's session level are as they left them", async () => {
    const { berth, plans } = demoHome();
    ensureDemoProject(berth, io([]));
    // alice's chat: "echo hi > notes.txt" (the fake's write program); bob's chat at medium.
    const aliceRun = await berth.runner.run({ project: DEMO_PROJECT, tenantKey: 'web:alice', message: 'write notes.txt hi' });
    expect(aliceRun.exitCode).toBe(0);
    await berth.runner.run({ project: DEMO_PROJECT, tenantKey: 'web:bob', message: 'true', level: 'medium' });
    const project = berth.store.get(DEMO_PROJECT);
    const aliceWorkspace = join(project.paths.dir, 'workspaces', aliceRun.workspaceId);
    expect(fs.readFileSync(join(aliceWorkspace, 'notes.txt'), 'utf8')).toBe('hi');
    const levelsBefore = berth.sessions.list(project).map((s) => [s.tenant_key, s.settings.permission_level]);
    plans.length = 0;

    const out: string[] = [];
    expect(await runDemo(berth, io(out))).toBe(0);
    expect(out.join('')).toContain(
      `The demo runs as its own tenants ${DEMO_TENANTS.alice} and ${DEMO_TENANTS.bob} in project "demo" of ${berth.home}; no one else's workspace or session is touched.`,
    );

    // Five runs, none of them with a real tenant's workspace (or anything in it) mounted.
    expect(plans).toHaveLength(5);
    const sources = plans.flatMap((p) => p.mounts.flatMap((m) => (m.type === 'bind' ? [m.source] : [])));
    expect(sources.filter((s) => s === aliceWorkspace || s.startsWith(`${aliceWorkspace}/`))).toEqual([]);
    expect(fs.readFileSync(join(aliceWorkspace, 'notes.txt'), 'utf8')).toBe('hi');
    // The real tenants' sessions are the ones they had, at their levels; the demo's are its own.
    const after = berth.sessions.list(project).map((s) => [s.tenant_key, s.settings.permission_level]);
    expect(after.filter(([t]) => !String(t).startsWith('demo:'))).toEqual(levelsBefore);
    expect(new Set(after.filter(([t]) => String(t).startsWith('demo:')).map(([t]) => t))).toEqual(
      new Set([DEMO_TENANTS.alice, DEMO_TENANTS.bob]),
    );
  });

  it('refuses to run in a demo project whose tenants share one workspace, and runs nothing', async () => {
    const { berth, plans } = demoHome();
    berth.store.create({ name: DEMO_PROJECT, workspace_isolation: false });
    await expect(runDemo(berth, io([]))).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      details: { issues: [{ field: 'workspace_isolation', reason: 'must be on for the demo' }] },
    });
    expect(plans).toEqual([]);
  });
});
