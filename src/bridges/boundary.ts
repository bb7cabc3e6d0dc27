import { SHARED_MOUNT, MEMORY_MOUNT } from '../plan/run-plan.js';
import type { CredentialUse, Receipt } from '../plan/receipt.js';
import type { RunRecord } from '../store/run-log.js';

/**
 * /boundary: a person's last run's receipt in a few plain lines (where the agent ran, what it
 * saw, what it could reach, whether all of it was as planned). The whole receipt is the
 * operator's (berth runs --receipt). Never a host path: targets inside the container only.
 */

const RUNTIME_WORDS: Record<string, string> = {
  runsc: "in gVisor, a sandbox with its own kernel (not this server's)",
  runc: "in a container on this server's kernel (runc)",
  crun: "in a container on this server's kernel (crun)",
};

function sawWords(r: Receipt): string {
  const extra = r.planned.mounts.flatMap((m) => {
    const how = m.read_only ? 'read-only' : 'writable';
    if (m.target === MEMORY_MOUNT) return [`the project's memory (${how})`];
    if (m.target.startsWith(`${SHARED_MOUNT}/`)) return [`the shared area ${m.target.slice(SHARED_MOUNT.length + 1)} (${how})`];
    return [];
  });
  const folder =
    r.policy.folder === 'own' ? 'only your folder' : "the project's whole folder (this project does not give each person their own)";
  return extra.length ? `${folder}, and ${extra.join(', ')}` : folder;
}

/** The hosts, at most ten of them, then how many more. */
function hostsWords(allow: readonly string[]): string {
  const shown = allow.slice(0, 10);
  if (allow.length > shown.length) return `${shown.join(', ')} and ${allow.length - shown.length} more`;
  return shown.length > 1 ? `${shown.slice(0, -1).join(', ')} and ${shown.at(-1)}` : (shown[0] ?? '');
}

function reachWords(r: Receipt): string {
  if (!r.policy.egress) return 'no network at all (only your model, through berth)';
  if (!r.policy.allow.length) return 'no website (only your model, through berth)';
  return `${hostsWords(r.policy.allow)}, and no other network`;
}

/** "GITHUB_TOKEN → POST api.github.com/repos/…/pulls, 201": one request berth added a secret to (or refused one for). */
function useLine(u: CredentialUse): string {
  const path = u.path.length > 40 ? `${u.path.slice(0, 20)}…${u.path.slice(-15)}` : u.path;
  return `${u.secret} → ${u.method} ${u.host}${path}, ${u.note ? `not sent (${u.status})` : u.status}`;
}

function secretsLine(secrets: readonly string[]): string {
  const it = secrets.length === 1 ? 'it' : 'them';
  return `berth adds ${hostsWords(secrets)} to requests for the hosts meant for ${it}; your agent never sees ${it}`;
}

/** What berth sent a person's secrets with in one run, the first few. */
function usesWords(r: Receipt): string[] {
  const uses = r.credential_uses ?? [];
  if (!uses.length) return [];
  const lines = uses.slice(0, 5).map((u) => `- ${useLine(u)}`);
  const more = uses.length - 5 + (r.more_credential_uses ?? 0);
  return [
    `berth added a secret to ${uses.length + (r.more_credential_uses ?? 0)} request${uses.length === 1 && !r.more_credential_uses ? '' : 's'}:`,
    ...lines,
    ...(more > 0 ? [`- and ${more} more (berth runs --receipt shows them)`] : []),
  ];
}

function checkedWords(r: Receipt): string[] {
  const n = r.violations.length;
  if (n)
    return [
      `⚠ It did NOT match berth's plan (${n} difference${n === 1 ? '' : 's'}; the operator is told):`,
      ...r.violations.slice(0, 3).map((v) => `- ${v}`),
      ...(n > 3 ? [`- and ${n - 3} more`] : []),
    ];
  // Nothing read is never "matched": this launcher (a cluster's, today) cannot look into its containers yet.
  if (r.unobserved.length === Object.keys(r.planned).length)
    return ['berth could not look into this container as it started, so none of this was checked this time.'];
  const unseen = r.unobserved.length ? ` (not checked: ${r.unobserved.join(', ').replace(/_/g, ' ')})` : '';
  return [`✓ Checked as it started: what berth could read matched its plan${unseen}.`];
}

/**
 * One fact a line, each under a word a person scans for (ran, saw, could reach, secrets), so it
 * reads on a phone as well as on a wide page.
 */
export function boundaryWords(record: RunRecord | undefined): string {
  if (!record) return 'berth: no run of yours yet. Send a message, then ask /boundary again.';
  const r = record.receipt;
  if (!r) return `berth: your last run (${record.run}) has no receipt: it ran on an older berth.`;
  const where = RUNTIME_WORDS[r.planned.runtime] ?? `under ${r.planned.runtime}`;
  const start =
    r.policy.start === 'warm'
      ? "your conversation's kept container"
      : r.policy.start === 'pool'
        ? 'a container berth had ready'
        : 'a new container';
  const secrets = r.policy.egress ? r.policy.secrets : [];
  return [
    `berth: your last run, at ${record.finished_at.slice(0, 16).replace('T', ' ')} UTC (run ${record.run}):`,
    `- ran: ${where}, in ${start}`,
    `- saw: ${sawWords(r)}`,
    `- could reach: ${reachWords(r)}`,
    ...(secrets.length ? [`- secrets: ${secretsLine(secrets)}`] : []),
    ...usesWords(r),
    ...checkedWords(r),
  ].join('\n');
}

/** Runs /secrets reads back, and the lines it shows. */
export const SECRETS_RUNS = 20;
const SECRETS_LINES = 10;

/**
 * /secrets: the requests berth added a granted secret to for this person, newest run first (each
 * run's own in order), from the receipts of their last SECRETS_RUNS runs. Names and where only.
 */
export function secretsWords(records: readonly RunRecord[]): string {
  const granted = records.find((r) => r.receipt)?.receipt?.policy.secrets ?? [];
  const uses = records.flatMap((r) => {
    const when = r.finished_at.slice(0, 16).replace('T', ' ');
    const kept = r.receipt?.credential_uses ?? [];
    return [
      ...kept.map((u) => `- ${when} ${useLine(u)}`),
      ...(r.receipt?.more_credential_uses ? [`- ${when} and ${r.receipt.more_credential_uses} more`] : []),
    ];
  });
  const grants = granted.length
    ? `berth adds ${granted.join(', ')} to your agent's requests for the hosts it is meant for; your agent never sees the value.`
    : 'Your last run had no secret that berth adds for it.';
  const n = records.length || SECRETS_RUNS;
  if (!uses.length) return `berth: no request of yours got a secret in ${n === 1 ? 'your last run' : `your last ${n} runs`}.\n${grants}`;
  const shown = uses.slice(0, SECRETS_LINES);
  return [
    `berth: requests berth added a secret to (UTC, newest run first):`,
    ...shown,
    ...(uses.length > shown.length
      ? [`- and ${uses.length - shown.length} more lines (the operator's berth runs --receipt shows them)`]
      : []),
    grants,
  ].join('\n');
}
