import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { secretsGrantedTo } from '../../src/config/secrets.js';
import { sharedGrantsFor } from '../../src/config/grants.js';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { checkGrants } from '../../src/cli/doctor.js';
import { unitHome } from '../helpers.js';

/**
 * A project's grants live in berth.yaml, not in the project (issue item 6a): a secret's
 * `grants: [{project: …}]` and `projects.<name>.shared_access`. `project delete` moved the project
 * to the trash and left them, so a new project of the same name (made by anyone who may create
 * projects) inherited the secrets and areas granted to the old one. Now they go with the project,
 * and doctor FAILs on a grant to a project that does not exist.
 */

const area = fs.mkdtempSync(join(os.tmpdir(), 'berth-area-'));
const token = join(fs.mkdtempSync(join(os.tmpdir(), 'berth-tok-')), 'tok');
fs.writeFileSync(token, 'secret-value\n', { mode: 0o600 });
afterAll(() => fs.rmSync(area, { recursive: true, force: true }));

const CONFIG = [
  "# the operator's comment stays",
  `shared_workspaces: { docs: ${area} }`,
  'projects:',
  '  billing:',
  '    shared_access: [docs]',
  '  other:',
  '    shared_access: [docs]',
  'secrets:',
  '  GH_TOKEN:',
  `    file: ${token}`,
  '    grants:',
  '      - { project: billing, host: api.github.com }',
  '      - { project: other, host: api.github.com }',
  '      - project: billing',
  '        host: uploads.github.com',
  '',
].join('\n');

describe('project delete takes its grants from berth.yaml (issue 6a)', () => {
  it('a new project of the same name inherits no secret grant and no shared area; other projects keep theirs', async () => {
    await using h = unitHome({ config: CONFIG });
    h.create({ name: 'billing', workspace_isolation: true, agent: 'shell' });
    h.create({ name: 'other', workspace_isolation: true, agent: 'shell' });
    expect(secretsGrantedTo(h.berth.config.secrets, 'billing')).toEqual(['GH_TOKEN']);

    await h.berth.admin.deleteProject('billing', 'billing');
    h.create({ name: 'billing', workspace_isolation: true, agent: 'shell' });
    const config = h.berth.config;
    expect(secretsGrantedTo(config.secrets, 'billing')).toEqual([]);
    expect(sharedGrantsFor(config, 'billing')).toEqual([]);
    expect(secretsGrantedTo(config.secrets, 'other')).toEqual(['GH_TOKEN']);
    expect(sharedGrantsFor(config, 'other').map((g) => g.name)).toEqual(['docs']);
    const text = fs.readFileSync(join(h.home, 'berth.yaml'), 'utf8');
    expect(text).toContain("# the operator's comment stays");
    expect(parseYaml(text).secrets.GH_TOKEN.grants).toEqual([{ project: 'other', host: 'api.github.com' }]);
    expect(parseYaml(text).projects.billing).toBeUndefined();
  });

  it('doctor FAILs on a grant to a project that does not exist, naming it and how to take it back', () => {
    const config = BerthConfigSchema.parse(parseYaml(CONFIG));
    const checks = checkGrants(config, ['other']);
    expect(checks.filter((c) => c.status === 'fail').map((c) => c.name)).toEqual([
      'grant projects.billing.shared_access.0',
      'grant secrets.GH_TOKEN.grants.0',
      'grant secrets.GH_TOKEN.grants.2',
    ]);
    expect(checks.find((c) => c.name === 'grant secrets.GH_TOKEN.grants.0')?.detail).toMatch(
      /project "billing", which does not exist.*berth secret revoke GH_TOKEN --project billing/,
    );
    expect(checkGrants(config, ['billing', 'other'])).toEqual([
      { name: 'grants', status: 'ok', detail: expect.stringContaining('5 grant(s)') },
    ]);
  });
});
