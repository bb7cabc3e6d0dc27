import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { sharedGrantsFor } from '../../src/config/grants.js';
import { checkOperatorConfig } from '../../src/config/operator-checks.js';

/** Shared areas under `launcher: kubernetes`: each granted one needs its PVC (kubernetes.shared_claims). */

const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-kube-shared-')));
const area = join(home, 'areas', 'docs');
fs.mkdirSync(area, { recursive: true });
afterAll(() => fs.rmSync(home, { recursive: true, force: true }));

const config = (kubernetes: Record<string, unknown> | undefined, launcher = 'kubernetes') =>
  BerthConfigSchema.parse({
    launcher,
    ...(kubernetes ? { kubernetes } : {}),
    shared_workspaces: { docs: area },
    projects: { web: { shared_access: ['docs'] } },
  });

describe('shared areas on Kubernetes', () => {
  it('a granted area with no claim is a config error naming the grant; a claim for no area is one too', () => {
    expect(checkOperatorConfig(config(undefined), home)).toEqual([
      { field: 'projects.web.shared_access.0', reason: expect.stringContaining('kubernetes.shared_claims.docs') },
    ]);
    expect(checkOperatorConfig(config({ shared_claims: { docs: 'team-docs', other: 'x' } }), home)).toEqual([
      { field: 'kubernetes.shared_claims.other', reason: 'names no shared area "other"' },
    ]);
    // On Docker the claims mean nothing and are not asked for.
    expect(checkOperatorConfig(config(undefined, 'docker'), home)).toEqual([]);
  });

  it("a project's grant carries its area's claim to the plan", () => {
    expect(sharedGrantsFor(config({ shared_claims: { docs: 'team-docs' } }), 'web')).toEqual([
      { name: 'docs', path: area, mode: 'ro', claim: 'team-docs' },
    ]);
    expect(sharedGrantsFor(config(undefined, 'docker'), 'web')).toEqual([{ name: 'docs', path: area, mode: 'ro' }]);
  });

  it('refuses a claim name Kubernetes would not take', () => {
    expect(() => config({ shared_claims: { docs: 'Team Docs' } })).toThrow(/PersistentVolumeClaim name/);
  });
});
