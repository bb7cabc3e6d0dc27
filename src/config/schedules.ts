import { z } from 'zod';

/** berth.yaml `schedules:`: who may schedule runs, how many each tenant keeps, how often they may run. */
export const MAX_SCHEDULES_PER_TENANT = 1000;

/** An IANA zone this Node knows (plan/time-zone.ts reads times in it; config sits below plan). */
function isTimeZone(name: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/.test(name)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export const SchedulesSchema = z
  .object({
    who: z
      .enum(['everyone', 'admins', 'nobody'])
      .default('everyone')
      .describe(
        'Who may make a schedule in a chat or through the agent\'s schedule tool: every chat user, a project\'s admins (metadata.json "admins"), or nobody. The operator (CLI, API) always may.',
      ),
    per_tenant: z
      .number()
      .int()
      .min(0)
      .max(MAX_SCHEDULES_PER_TENANT)
      .default(20)
      .describe(
        'Schedules one tenant (a chat user or team) of a project keeps at once; the next is refused with LIMIT_REACHED until one is cancelled or done.',
      ),
    min_interval_seconds: z
      .number()
      .int()
      .min(1)
      .max(7 * 86_400)
      .default(300)
      .describe(
        'The shortest time between two runs of one repeating schedule (a "/every 10s" is refused below it). The operator\'s own schedules are bound by it too.',
      ),
    time_zone: z
      .string()
      .min(1)
      .max(64)
      .refine(isTimeZone, 'must be an IANA time zone such as Europe/Berlin, America/New_York or UTC')
      .default('UTC')
      .describe('The time zone of a person who has not set theirs (/tz Europe/Berlin): an IANA name.'),
    tick_seconds: z.number().int().min(1).max(60).default(1).describe('How often berth looks for schedules that are due.'),
  })
  .strict()
  .prefault({});
export type SchedulesSettings = z.output<typeof SchedulesSchema>;
