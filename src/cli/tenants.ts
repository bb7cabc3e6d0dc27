import { resolve } from 'node:path';
import { BerthError } from '../base/errors.js';
import { printable } from '../base/printable.js';
import { need, type Command } from './command.js';

/** `berth tenant export|forget`: a person's data, whole (admin/tenant-data.ts decides; this only translates). */
export const TENANT_COMMANDS: Record<string, Command> = {
  'tenant export': {
    usage:
      'tenant export <project> <tenant> --out FILE [--json]\n  One tar archive of everything berth keeps of the tenant in the project: sessions, transcripts, agent homes, their own workspaces, run records, memory entries, schedules and audit lines (manifest.json lists what is in it and what was skipped).',
    options: { out: { type: 'string' }, json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project and tenant (tenant export <project> <tenant> --out FILE)');
      const [project, tenant] = pos as [string, string];
      if (typeof v.out !== 'string') throw new BerthError('USAGE', 'missing --out FILE (where the archive is written)');
      const r = await berth().tenants.export(project, tenant, resolve(v.out));
      if (v.json) io.out(`${JSON.stringify(r, null, 2)}\n`);
      else {
        const counts = Object.entries(r.counts)
          .map(([k, n]) => `${n} ${k}`)
          .join(', ');
        io.out(`wrote ${r.out} (${r.bytes} bytes): ${counts}\n`);
        for (const s of r.skipped.slice(0, 20)) io.out(`  skipped ${printable(s.path)}: ${s.reason}\n`);
      }
      return 0;
    },
  },
  'tenant forget': {
    usage:
      'tenant forget <project> <tenant> --confirm <tenant> [--json]\n  Remove everything berth keeps of the tenant in the project (sessions, containers, transcripts, agent homes, workspaces, run records, memory, schedules, chat logins, kept files); the audit log keeps one line naming them by digest.',
    options: { confirm: { type: 'string' }, json: { type: 'boolean' } },
    async run(berth, v, pos, io) {
      need(pos, 2, 'project and tenant (tenant forget <project> <tenant> --confirm <tenant>)');
      const [project, tenant] = pos as [string, string];
      const r = await berth().tenants.forget(project, tenant, typeof v.confirm === 'string' ? v.confirm : undefined);
      if (v.json) io.out(`${JSON.stringify(r, null, 2)}\n`);
      else
        io.out(
          `forgot ${printable(tenant)} in ${project}: ${Object.entries(r.removed)
            .map(([k, n]) => `${n} ${k.replace('_', ' ')}`)
            .join(', ')}\n`,
        );
      return 0;
    },
  },
  'tenant frozen': {
    usage:
      'tenant frozen [--json]\n  Tenants whose runs are stopped because one of their decoy credentials was used (berth.yaml projects.<p>.honeytokens).',
    options: { json: { type: 'boolean' } },
    async run(berth, v, _pos, io) {
      const list = berth().tenants.frozen();
      if (v.json) io.out(`${JSON.stringify(list, null, 2)}\n`);
      else if (list.length === 0) io.out('no tenant is frozen\n');
      else
        for (const f of list)
          io.out(`${f.project}  ${printable(f.tenant)}  since ${f.at}  ${printable(f.where)}${f.run ? `  run ${f.run}` : ''}\n`);
      return 0;
    },
  },
  'tenant unfreeze': {
    usage:
      'tenant unfreeze <project> <tenant>\n  Let a frozen tenant run again (after a look at what their container did: berth runs, berth audit).',
    options: {},
    async run(berth, _v, pos, io) {
      need(pos, 2, 'project and tenant (tenant unfreeze <project> <tenant>)');
      const [project, tenant] = pos as [string, string];
      const r = berth().tenants.unfreeze(project, tenant);
      io.out(r.unfrozen ? `${printable(tenant)} may run again in ${project}\n` : `${printable(tenant)} was not frozen in ${project}\n`);
      return 0;
    },
  },
};
