import { type ProjectMetadataInput, type ProjectUpdate } from '../config/metadata.js';
import { BerthError } from '../base/errors.js';
import type { Berth } from '../main.js';
import type { ProjectView } from '../admin/views.js';
import { need, type Command, type Out } from './command.js';
import { printable } from '../base/printable.js';

function describeProject(berth: Berth, name: string) {
  return { ...berth.admin.getProject(name), workspaces: berth.admin.listWorkspaces(name) };
}

function printSkipped(p: ProjectView, io: Out): void {
  for (const e of p.protection.entries) {
    if (e.source === 'empty')
      io.err(`berth: protected "${printable(e.path)}" does not exist in the project; containers get an empty read-only ${e.kind}\n`);
    for (const s of e.skipped) io.err(`berth: not protected: ${printable(s.path)} (${s.reason})\n`);
  }
  if (!p.workspace_isolation && p.protected_paths.length > 0) {
    io.err(
      'berth: note: with workspace isolation off, tenants could edit these files until now; protected content is what is there at this moment\n',
    );
  }
}

/** What a delete did to cluster volumes (launcher: kubernetes). */
export function describeRetired(r: { deleted: number; waiting: number }): string {
  if (!r.deleted && !r.waiting) return '';
  return `cluster volumes: ${r.deleted} deleted${r.waiting ? `; ${r.waiting} wait for the cluster to answer (never mounted again; berth retries)` : ''}\n`;
}

/** Projects and the operator's settings for them. */
export const PROJECT_COMMANDS: Record<string, Command> = {
  'project create': {
    usage:
      'project create <name> [--isolation] [--protect PATH]... [--image IMG] [--agent PRESET] [--runtime NAME] [--model UPSTREAM]... [--allow-host HOST]...\n  Make projects/<name>/ (all or nothing). --runtime: an OCI runtime berth.yaml offers (runc; runsc for gVisor);\n  --model names a berth.yaml models entry its agents may call;\n  --allow-host a host (or *.suffix, optionally :port) agents at medium and high may reach.',
    options: {
      isolation: { type: 'boolean' },
      protect: { type: 'string', multiple: true },
      image: { type: 'string' },
      agent: { type: 'string' },
      runtime: { type: 'string' },
      model: { type: 'string', multiple: true },
      'allow-host': { type: 'string', multiple: true },
    },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const input: ProjectMetadataInput = { name: pos[0] as string };
      if (v.isolation) input.workspace_isolation = true;
      if (v.protect) input.protected_paths = v.protect as string[];
      if (v.image) input.image = v.image as string;
      if (v.agent) input.agent = v.agent as ProjectMetadataInput['agent'];
      if (v.runtime) input.runtime = v.runtime as string;
      if (v.model) input.models = { upstreams: v.model as string[] };
      if (v['allow-host']) input.egress = { allow: v['allow-host'] as string[] };
      const p = berth().admin.createProject(input);
      printSkipped(p, io);
      io.out(`created project ${p.name} at ${p.path}\n`);
      return 0;
    },
  },
  'project update': {
    usage:
      "project update <name> [--isolation|--no-isolation] [--protect PATH]... [--no-protect] [--timeout SECONDS] [--image IMG] [--agent PRESET] [--runtime NAME] [--model UPSTREAM]... [--allow-host HOST]... [--no-allow-host] [--approvals WHO]\n  --runtime: the OCI runtime its runs use from the next message (warm containers are recycled).\n  --protect replaces the list, --no-protect empties it; protection is re-snapshotted.\n  --model and --allow-host replace their lists (the model budget and allowed models stay); --no-allow-host empties the allowlist.\n  --approvals: who is asked when an agent wants a host outside the allowlist: person (the chat's, or the operator), operator (only), off (refused).",
    options: {
      isolation: { type: 'boolean' },
      'no-isolation': { type: 'boolean' },
      protect: { type: 'string', multiple: true },
      'no-protect': { type: 'boolean' },
      timeout: { type: 'string' },
      image: { type: 'string' },
      agent: { type: 'string' },
      runtime: { type: 'string' },
      model: { type: 'string', multiple: true },
      'allow-host': { type: 'string', multiple: true },
      'no-allow-host': { type: 'boolean' },
      approvals: { type: 'string' },
    },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      if (v['allow-host'] && v['no-allow-host']) throw new BerthError('USAGE', '--allow-host and --no-allow-host contradict each other');
      if (v.isolation && v['no-isolation']) throw new BerthError('USAGE', '--isolation and --no-isolation contradict each other');
      if (v.protect && v['no-protect']) throw new BerthError('USAGE', '--protect and --no-protect contradict each other');
      const patch: Record<string, unknown> = {};
      if (v.isolation) patch.workspace_isolation = true;
      if (v['no-isolation']) patch.workspace_isolation = false;
      if (v.protect) patch.protected_paths = v.protect;
      if (v['no-protect']) patch.protected_paths = [];
      if (v.image) patch.image = v.image;
      if (v.agent) patch.agent = v.agent;
      if (v.runtime) patch.runtime = v.runtime;
      if (v.model) patch.models = { ...berth().admin.getProject(pos[0] as string).models, upstreams: v.model };
      if (v['allow-host']) patch.egress = { allow: v['allow-host'] };
      if (v['no-allow-host']) patch.egress = { allow: [] };
      if (v.approvals !== undefined) patch.chat = { ...berth().admin.getProject(pos[0] as string).chat, approvals: v.approvals };
      if (v.timeout !== undefined) {
        const seconds = Number(v.timeout);
        patch.limits = { timeout_seconds: Number.isFinite(seconds) ? seconds : v.timeout };
      }
      const p = await berth().admin.updateProject(pos[0] as string, patch as ProjectUpdate);
      printSkipped(p, io);
      io.out(`updated project ${p.name}\n`);
      return 0;
    },
  },
  'project delete': {
    usage:
      "project delete <name> --confirm <name>\n  Stops its containers, releases its workspace quotas and moves the project to the trash (.berth/trash/); its session tokens and chat logins end, its grants leave berth.yaml (secrets', shared areas'), and on Kubernetes its volumes are deleted.",
    options: { confirm: { type: 'string' } },
    async run(berth, v, pos, io) {
      need(pos, 1, 'project name');
      const name = pos[0] as string;
      if (v.confirm === undefined)
        throw new BerthError('USAGE', `deleting needs --confirm ${name}`, {
          hint: 'the name twice, so a slip of the shell deletes nothing',
        });
      const b = berth();
      const done = await b.admin.deleteProject(name, v.confirm as string);
      io.out(
        `deleted project ${done.name}: moved to ${done.trashed_to}${done.containers_removed ? `; ${done.containers_removed} container(s) stopped` : ''}\n`,
      );
      // launcher: kubernetes: its volumes on the cluster, before this process ends.
      if (b.config.launcher === 'kubernetes') io.out(describeRetired(await b.admin.retireVolumes()));
      return 0;
    },
  },
  'project get': {
    usage: 'project get <name>\n  Settings, workspaces and protection as JSON.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const b = berth();
      io.out(`${JSON.stringify(describeProject(b, pos[0] as string), null, 2)}\n`);
      return 0;
    },
  },
  'project list': {
    usage: 'project list [--json]\n  One line per project (or JSON).',
    options: { json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 0, '');
      const b = berth();
      const projects = b.admin.listProjects();
      if (v.json) {
        io.out(
          `${JSON.stringify(
            projects.map((p) => describeProject(b, p.name)),
            null,
            2,
          )}\n`,
        );
        return 0;
      }
      if (projects.length === 0) {
        io.out('no projects yet; create one with "berth project create <name>"\n');
        return 0;
      }
      for (const p of projects) {
        const agent = Array.isArray(p.agent) ? 'custom' : p.agent;
        io.out(
          `${p.name}\tisolation=${p.workspace_isolation ? 'on' : 'off'}\tagent=${agent}\tprotected=${p.protected_paths.join(',') || '-'}\tworkspaces=${p.workspace_count}\n`,
        );
      }
      return 0;
    },
  },
  'project show': {
    usage: "project show <name>\n  Private workspace and shared-area grants (the operator's view).",
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const b = berth();
      b.admin.getProject(pos[0] as string);
      const a = b.operator.access(pos[0] as string);
      io.out(
        `project ${a.project}\nprivate workspace: ${a.private_workspace}${a.private_workspace_overridden ? ' (override in berth.yaml)' : ''}\n`,
      );
      io.out(
        a.shared_access.length
          ? a.shared_access.map((g) => `shared: /shared/${g.name} → ${g.path} (${g.mode})\n`).join('')
          : 'shared: none (deny by default)\n',
      );
      return 0;
    },
  },
  'project grant': {
    usage:
      'project grant <project> <area> [--rw]\n  Grant a shared area of berth.yaml (read-only unless --rw); comments in berth.yaml are kept.',
    options: { rw: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project name and shared area');
      const a = await berth().operator.grant(pos[0] as string, pos[1] as string, v.rw ? 'rw' : 'ro');
      io.out(`granted ${printable(pos[1] as string)} (${v.rw ? 'rw' : 'ro'}) to ${a.project}\n`);
      return 0;
    },
  },
  'project revoke': {
    usage: 'project revoke <project> <area>\n  Revoke a shared-area grant.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and shared area');
      await berth().operator.revoke(pos[0] as string, pos[1] as string);
      io.out(`revoked ${printable(pos[1] as string)} from ${printable(pos[0] as string)}\n`);
      return 0;
    },
  },
  'project set-private-workspace': {
    usage:
      'project set-private-workspace <project> <abs-path>\n  Move the project directory there (same filesystem) and record it in berth.yaml.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project name and absolute path');
      const a = await berth().operator.setPrivateWorkspace(pos[0] as string, pos[1] as string);
      io.out(`project ${a.project} now lives at ${a.private_workspace}\n`);
      return 0;
    },
  },
  'project unset-private-workspace': {
    usage: 'project unset-private-workspace <project>\n  Move the project back to workspaces_path.',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 1, 'project name');
      const a = await berth().operator.setPrivateWorkspace(pos[0] as string, undefined);
      io.out(`project ${a.project} now lives at ${a.private_workspace}\n`);
      return 0;
    },
  },
};
