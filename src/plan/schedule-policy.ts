import type { SchedulesSettings } from '../config/schedules.js';
import { shortestGapSeconds, type ScheduleSpec } from './schedule-spec.js';

/** Who asks for a schedule: the operator (CLI, API), a person in a chat, or their agent (its schedule tool). */
export type ScheduleActorKind = 'operator' | 'person' | 'agent';

export interface ScheduleRefusal {
  code: 'PERMISSION_DENIED' | 'CONFIG_INVALID';
  message: string;
  field: string;
}

/**
 * berth.yaml's rules for a new schedule, decided once for every surface (pure): who may make one
 * (the operator always; a person or their agent as `schedules.who` says, by the tenant's place in
 * the project's admins) and how often a repeat may run (`min_interval_seconds`, the operator too).
 * The per-tenant count is the store's to hold, under its lock.
 */
export function scheduleRefusal(
  rules: Pick<SchedulesSettings, 'who' | 'min_interval_seconds'>,
  ask: { actor: ScheduleActorKind; isAdmin: boolean; spec: ScheduleSpec },
): ScheduleRefusal | undefined {
  if (ask.actor !== 'operator' && (rules.who === 'nobody' || (rules.who === 'admins' && !ask.isAdmin))) {
    const who = rules.who === 'nobody' ? 'the operator only' : "this project's admins";
    return { code: 'PERMISSION_DENIED', message: `schedules here are for ${who} (berth.yaml schedules.who)`, field: 'who' };
  }
  const gap = shortestGapSeconds(ask.spec);
  if (gap !== undefined && gap < rules.min_interval_seconds) {
    return {
      code: 'CONFIG_INVALID',
      message: `a schedule may repeat at most every ${rules.min_interval_seconds} seconds here (berth.yaml schedules.min_interval_seconds)`,
      field: 'every',
    };
  }
  return undefined;
}
