/** Every container berth starts carries these; listing, reaping and cleanup are label queries. */
export const LABELS = {
  managed: 'berth.managed',
  project: 'berth.project',
  workspace: 'berth.workspace',
  session: 'berth.session',
  run: 'berth.run',
} as const;

export const MANAGED_FILTER = { label: [`${LABELS.managed}=true`] };

export function projectFilter(project: string) {
  return { label: [`${LABELS.managed}=true`, `${LABELS.project}=${project}`] };
}
