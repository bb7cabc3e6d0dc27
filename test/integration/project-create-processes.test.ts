import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CREATE_STEPS } from '../../src/store/projects.js';
import { cli, cliAsync, listTree, unitHome } from '../helpers.js';

/**
 * `project create` across processes: creators that race for one name, and a creator killed
 * (SIGKILL, no cleanup: a power cut) after each of its steps. These need separate processes, so
 * they run the built CLI (bin/berth.js → dist/) here rather than in the unit tier; the home's
 * launcher is the in-memory one, no engine is asked.
 */
describe('project create, across processes', () => {
  it('of two creates of one name, exactly one succeeds and the other gets PROJECT_EXISTS', async () => {
    await using h = unitHome();
    const runs = await Promise.all(
      [1, 2, 3, 4].map((i) => cliAsync(['--home', h.home, 'project', 'create', 'race', '--image', `img:${i}`])),
    );
    expect(runs.filter((r) => r.code === 0)).toHaveLength(1);
    expect(runs.filter((r) => r.code === 4).map((r) => r.stderr)).toEqual(
      Array.from({ length: 3 }, () => expect.stringMatching(/^PROJECT_EXISTS: /)),
    );
    expect(h.berth.store.get('race').metadata.name).toBe('race');
    expect(fs.readdirSync(join(h.home, '.berth/tmp'))).toEqual([]);
  });

  it.each(CREATE_STEPS)('a creator killed right after "%s" leaves a whole project or none, and the name stays usable', async (step) => {
    await using h = unitHome();
    const r = cli(['--home', h.home, 'project', 'create', 'crash', '--protect', 'AGENTS.md'], { BERTH_TEST_KILL_AFTER_STEP: step });
    expect(r.code).toBe(-1); // killed by the signal, no exit code
    const dir = join(h.home, 'projects/crash');
    expect(fs.existsSync(dir)).toBe(step === 'project-moved');
    if (!fs.existsSync(dir)) h.create({ name: 'crash', protected_paths: ['AGENTS.md'] }); // the name is free again
    const p = h.berth.store.get('crash');
    expect(listTree(dir)).toEqual([
      '.factory',
      '.factory/mcp.json',
      '.factory/settings.json',
      'AGENTS.md',
      'memory',
      'metadata.json',
      'sessions',
      'workflows',
      'workspaces',
    ]);
    expect(p.snapshot?.entries.map((e) => e.path)).toEqual(['AGENTS.md']);
  });
});
