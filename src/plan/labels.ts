/** Every container berth starts carries these; listing, reaping and cleanup are label queries. */
export const LABELS = {
  managed: 'berth.managed',
  /** Which berth home started it: one installation never reaps another's containers. */
  installation: 'berth.installation',
  project: 'berth.project',
  workspace: 'berth.workspace',
  session: 'berth.session',
  run: 'berth.run',
  /**
   * What its writable /workspace reaches: "workspace" (isolated: its own), "project" (shared mode:
   * the whole project tree, every workspace in it) or "private" (a workflow step: workspaces hidden).
   * While a "project" container lives, no workspace of the project gets or changes its filesystem.
   */
  reach: 'berth.reach',
  /** The berth process that started it (its process identity, "<pid>.<start time>.<boot>"): a starting berth reaps only dead owners' containers. */
  owner: 'berth.owner',
} as const;

export interface ContainerQuery {
  installation: string;
  project?: string;
  run?: string;
}

export function labelFilter(q: ContainerQuery) {
  const label = [`${LABELS.managed}=true`, `${LABELS.installation}=${q.installation}`];
  if (q.project) label.push(`${LABELS.project}=${q.project}`);
  if (q.run) label.push(`${LABELS.run}=${q.run}`);
  return { label };
}
