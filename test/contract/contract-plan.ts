import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { agentOwner, BerthConfigSchema, type BerthConfig } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema, type ProjectMetadataInput } from '../../src/config/metadata.js';
import { installationId } from '../../src/main.js';
import { planRun, type RunPlan } from '../../src/plan/run-plan.js';
import { prepareMounts } from '../../src/runs/prepare-mounts.js';

/** BERTH_TEST_CPUS: the real Kubernetes tier's small CPU per pod (a request the node reserves; 2 cores hold 8). */
const TEST_CPUS = process.env.BERTH_TEST_CPUS ? { cpus: Number(process.env.BERTH_TEST_CPUS) } : {};

/**
 * Real plans for the launcher contract: planRun on a temporary home (isolated workspaces of two
 * tenants, a protected AGENTS.md served read-only from its snapshot), carried out on the host by
 * prepareMounts, as the runner does. The same plans go to every launcher; only the launcher and
 * the commands differ.
 */

export type Tenant = 'a' | 'b';

export interface ContractPlanOptions {
  argv: string[];
  tenant?: Tenant;
  project?: string;
  run?: string;
  limits?: ProjectMetadataInput['limits'];
  /** Overrides the planned timeout (whole seconds there): a launcher takes the plan as data, and the contract's bounds stay quick. */
  timeoutMs?: number;
}

export interface ContractHome {
  home: string;
  installation: string;
  /** The host directory a tenant's /workspace shows. */
  workspaceDir(tenant: Tenant, project?: string): string;
  /** berth's copy of the protected AGENTS.md (the read-only bind's source). */
  snapshotFile(project?: string): string;
  plan(opts: ContractPlanOptions): RunPlan;
  cleanup(): Promise<void>;
}

export const PROTECTED_TEXT = 'protected original\n';
export const SECRET_TEXT = 'tenant-a-secret\n';
/** The owner label of every contract plan (a berth process identity's form). */
export const CONTRACT_OWNER = '4242.1000.contract';

export function contractHome(opts: { image: string; runtime: string }): ContractHome {
  const home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-contract-')));
  const installation = installationId(home);
  const config: BerthConfig = BerthConfigSchema.parse({ images: { shell: opts.image }, runtimes: [...new Set(['runc', opts.runtime])] });
  const projectDir = (project: string) => join(home, 'projects', project);
  const workspaceDir = (tenant: Tenant, project = 'contract') => join(projectDir(project), 'workspaces', tenant);
  const snapshotDir = (project: string) => join(home, 'snapshots', project);

  /** The project's tree as berth would have made it: metadata, both workspaces, the snapshot. */
  function ensureProject(project: string): void {
    if (fs.existsSync(projectDir(project))) return;
    fs.mkdirSync(snapshotDir(project), { recursive: true });
    // World-writable: only the read-only bind can refuse a write (gVisor checks the mode first, runc the mount).
    fs.writeFileSync(join(snapshotDir(project), 'AGENTS.md'), PROTECTED_TEXT);
    fs.chmodSync(join(snapshotDir(project), 'AGENTS.md'), 0o666);
    fs.mkdirSync(projectDir(project), { recursive: true });
    fs.writeFileSync(join(projectDir(project), 'metadata.json'), '{}');
    for (const tenant of ['a', 'b'] as const) {
      const dir = workspaceDir(tenant, project);
      fs.mkdirSync(dir, { recursive: true });
      fs.chmodSync(dir, 0o777); // the agent user (10001) writes there
      fs.writeFileSync(join(dir, 'whoami.txt'), `tenant ${tenant}\n`);
    }
    fs.writeFileSync(join(workspaceDir('a', project), 'secret.txt'), SECRET_TEXT);
  }

  function plan(o: ContractPlanOptions): RunPlan {
    const project = o.project ?? 'contract';
    const tenant = o.tenant ?? 'a';
    ensureProject(project);
    const p = planRun({
      config,
      project: {
        dir: projectDir(project),
        metadataFile: join(projectDir(project), 'metadata.json'),
        metadata: ProjectMetadataSchema.parse({
          name: project,
          workspace_isolation: true,
          protected_paths: ['AGENTS.md'],
          runtime: opts.runtime,
          limits: { timeout_seconds: 30, ...TEST_CPUS, ...o.limits },
        }),
      },
      workspace: { id: tenant, dir: workspaceDir(tenant, project), isolated: true },
      protectedSnapshot: { dir: snapshotDir(project), entries: [{ path: 'AGENTS.md', kind: 'file' }] },
      run: { id: o.run ?? `r-${Math.random().toString(36).slice(2, 10)}`, level: 'medium', message: '', argv: o.argv },
      installation,
      ownerProcess: CONTRACT_OWNER,
    });
    prepareMounts(p, projectDir(project), agentOwner(config));
    return o.timeoutMs === undefined ? p : { ...p, limits: { ...p.limits, timeoutMs: o.timeoutMs } };
  }

  return {
    home,
    installation,
    workspaceDir,
    snapshotFile: (project = 'contract') => join(snapshotDir(project), 'AGENTS.md'),
    plan,
    async cleanup() {
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}
