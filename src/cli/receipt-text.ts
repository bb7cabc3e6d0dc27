import type { Boundary, BoundaryField, Observed, Receipt } from '../plan/receipt.js';
import type { RunRecord } from '../store/run-log.js';
import { printable } from '../base/printable.js';

/** `berth runs <project> --receipt`: a run's whole receipt, one fact a line, planned beside observed and where it was read. */

const rw = (readOnly: boolean) => (readOnly ? 'read-only' : 'writable');

function factText(field: BoundaryField, value: NonNullable<Observed[BoundaryField]>): string {
  switch (field) {
    case 'capabilities': {
      const c = value as Boundary['capabilities'];
      return `effective ${c.effective.join(',') || 'none'}; bounding ${c.bounding.join(',') || 'none'}`;
    }
    case 'namespaces':
      return Object.entries(value as Boundary['namespaces'])
        .map(([n, v]) => `${n}:${v}`)
        .join(' ');
    case 'mounts':
      return `${(value as Boundary['mounts']).length} (below)`;
    case 'interfaces':
      return (value as string[]).join(',') || 'none';
    case 'limits': {
      const l = value as Partial<Boundary['limits']>;
      const shown = (v: number | undefined, text: (v: number) => string) => (v === undefined ? 'not read' : text(v));
      return `memory ${shown(l.memory_bytes, (v) => `${Math.round(v / 2 ** 20)} MiB`)}, cpu ${shown(l.nano_cpus, (v) => String(v / 1e9))}, pids ${shown(l.pids, String)}`;
    }
    default:
      return String(value);
  }
}

export function receiptText(record: RunRecord): string {
  const r: Receipt | undefined = record.receipt;
  if (!r) return `run ${record.run} (${record.finished_at}): no receipt (an older berth ran it)\n`;
  const lines = [
    `run ${record.run}  ${record.finished_at}  session=${printable(record.session)}  level=${record.permission_level}  start=${r.policy.start}`,
  ];
  for (const field of Object.keys(r.planned) as BoundaryField[]) {
    const seen = r.observed[field];
    const observed = seen === undefined ? 'NOT OBSERVED' : `${factText(field, seen)} [${r.observed.seen_from[field] ?? '?'}]`;
    lines.push(`  ${field.padEnd(15)} planned ${factText(field, r.planned[field])}  |  observed ${observed}`);
  }
  const seenMounts = new Map((r.observed.mounts ?? []).map((m) => [m.target, m]));
  for (const m of r.planned.mounts) {
    const s = seenMounts.get(m.target);
    lines.push(
      `    ${printable(m.target).padEnd(24)} planned ${rw(m.read_only).padEnd(9)} observed ${r.observed.mounts ? (s ? rw(s.read_only) : 'MISSING') : '-'}`,
    );
  }
  for (const m of r.observed.mounts ?? [])
    if (!r.planned.mounts.some((p) => p.target === m.target))
      lines.push(`    ${printable(m.target).padEnd(24)} planned -         observed ${rw(m.read_only)} (NOT PLANNED)`);
  lines.push(`  folder          ${r.policy.folder === 'own' ? "the tenant's own" : 'the whole project'}`);
  lines.push(
    `  egress          ${r.policy.egress ? `allowlist: ${r.policy.allow.join(', ') || '(empty)'}; secrets added by berth: ${r.policy.secrets.join(', ') || 'none'}` : 'none (no network)'}`,
  );
  if (r.credential_uses) {
    lines.push(
      `  secrets used    ${r.credential_uses.length ? '' : 'none'}${r.more_credential_uses ? `(${r.more_credential_uses} more not kept)` : ''}`,
    );
    for (const u of r.credential_uses)
      lines.push(
        `    ${printable(u.secret)} → ${printable(u.method)} ${printable(u.host)}${printable(u.path)}  ${u.status}${u.note ? `  ${printable(u.note)}` : ''}`,
      );
  }
  lines.push(`  violations      ${r.violations.length ? '' : 'none'}`);
  for (const v of r.violations) lines.push(`    ${printable(v)}`);
  if (r.unobserved.length) lines.push(`  not observed    ${r.unobserved.join(', ')}`);
  if (record.receipt_digest) lines.push(`  digest          ${record.receipt_digest} (audit: berth audit --kind run_receipt)`);
  return `${lines.join('\n')}\n`;
}
