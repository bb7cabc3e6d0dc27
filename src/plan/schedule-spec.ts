import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { own } from '../base/own.js';
import { addDays, instantOf, localTimeOf, pad, shortTime, zoneNameOf } from './time-zone.js';

/**
 * When a schedule runs, as data, and its next time: pure (the clock is an argument). `/every`
 * takes an interval ("2h", "30 minutes") or days and a time ("weekday at 09:00", "mon,fri 18:30",
 * "09:00"); `/at` a moment ("+30s", "+2h", "14:00", "tomorrow 09:00", "fri 17:00",
 * "2026-12-24 18:00", an ISO time with its offset). Either may end in a time zone
 * ("Europe/Berlin"); else the person's. Times of day are wall-clock times in that zone, DST
 * included (time-zone.ts: a time in the spring gap runs after it, a repeated one once).
 */
export const ScheduleSpecSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('interval'),
      seconds: z
        .number()
        .int()
        .min(1)
        .max(366 * 86_400),
    })
    .strict(),
  z
    .object({
      kind: z.literal('weekly'),
      days: z.array(z.number().int().min(0).max(6)).min(1).max(7).describe('0 = Sunday … 6 = Saturday'),
      time: z
        .string()
        .regex(/^([01]\d|2[0-3]):[0-5]\d$/)
        .describe("HH:MM, wall clock in the schedule's zone"),
    })
    .strict(),
  z.object({ kind: z.literal('once'), at: z.string().datetime().describe('The moment, UTC') }).strict(),
]);
export type ScheduleSpec = z.infer<typeof ScheduleSpecSchema>;

/** A spec read from words: what it is, its zone, and how many words it took. */
export interface ReadWhen {
  spec: ScheduleSpec;
  zone: string;
  used: number;
}

const UNITS: Record<string, number> = {
  s: 1,
  sec: 1,
  secs: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  mins: 60,
  minute: 60,
  minutes: 60,
  h: 3600,
  hour: 3600,
  hours: 3600,
  d: 86_400,
  day: 86_400,
  days: 86_400,
};
const DAY_WORDS: Record<string, number> = {
  sun: 0,
  sunday: 0,
  sundays: 0,
  mon: 1,
  monday: 1,
  mondays: 1,
  tue: 2,
  tues: 2,
  tuesday: 2,
  tuesdays: 2,
  wed: 3,
  wednesday: 3,
  wednesdays: 3,
  thu: 4,
  thur: 4,
  thurs: 4,
  thursday: 4,
  thursdays: 4,
  fri: 5,
  friday: 5,
  fridays: 5,
  sat: 6,
  saturday: 6,
  saturdays: 6,
};
const DAY_SETS: Record<string, number[]> = {
  day: [0, 1, 2, 3, 4, 5, 6],
  days: [0, 1, 2, 3, 4, 5, 6],
  daily: [0, 1, 2, 3, 4, 5, 6],
  weekday: [1, 2, 3, 4, 5],
  weekdays: [1, 2, 3, 4, 5],
  weekend: [0, 6],
  weekends: [0, 6],
};
const TIME = /^([01]?\d|2[0-3]):([0-5]\d)$/;

const invalid = (field: string, value: string, reason: string) =>
  new BerthError('CONFIG_INVALID', `"${value.slice(0, 60)}" is not a time berth understands`, { issues: [{ field, reason }] });

const EVERY_HINT =
  'say an interval ("2h", "30 minutes") or days and a time ("weekday at 09:00", "mon,fri 18:30", "09:00"), optionally then a time zone';
const AT_HINT = 'say "+30s", "+2h", "14:00", "tomorrow 09:00", "fri 17:00" or "2026-12-24 18:00", optionally then a time zone';

/** "09:00" → "09:00"; "9:05" → "09:05". */
function timeOf(word: string | undefined): string | undefined {
  const m = word === undefined ? undefined : TIME.exec(word);
  return m ? `${pad(Number(m[1]))}:${m[2]}` : undefined;
}

/** "30m", "2h", or "30" "minutes": seconds and words used. */
function intervalOf(words: string[], at: number): { seconds: number; used: number } | undefined {
  const word = words[at]?.toLowerCase() ?? '';
  const joined = /^(\d{1,6})([a-z]+)$/.exec(word);
  if (joined && own(UNITS, joined[2] as string))
    return { seconds: Number(joined[1]) * (own(UNITS, joined[2] as string) as number), used: 1 };
  const unit = own(UNITS, words[at + 1]?.toLowerCase() ?? '');
  if (/^\d{1,6}$/.test(word) && unit) return { seconds: Number(word) * unit, used: 2 };
  // "every hour", "every minute" (never "every day": that wants a time)
  if (word === 'hour' || word === 'minute') return { seconds: own(UNITS, word) as number, used: 1 };
  return undefined;
}

/** "weekday", "mon,wed,fri", "mon, fri": the days and words used. */
function daysOf(words: string[], at: number): { days: number[]; used: number } | undefined {
  const set = own(DAY_SETS, words[at]?.toLowerCase() ?? '');
  if (set) return { days: set, used: 1 };
  const days = new Set<number>();
  let used = 0;
  for (let i = at; i < words.length; i++) {
    const names = (words[i] as string).toLowerCase().split(',').filter(Boolean);
    if (!names.length || !names.every((n) => own(DAY_WORDS, n) !== undefined || n === 'and')) break;
    for (const n of names) if (n !== 'and') days.add(own(DAY_WORDS, n) as number);
    used++;
    if (!(words[i] as string).endsWith(',') && !(words[i + 1] ?? '').startsWith(',') && words[i + 1]?.toLowerCase() !== 'and') break;
  }
  return days.size ? { days: [...days].sort(), used } : undefined;
}

/** A trailing time zone word, if the one at `at` is one. */
function zoneAt(words: string[], at: number): string | undefined {
  const word = words[at];
  if (word === undefined || !(word.includes('/') || word === 'UTC')) return undefined;
  return zoneNameOf(word);
}

/** Read `/every`'s spec from the start of `words`; `zone`: the person's. */
export function readEvery(words: string[], zone: string, field = 'every'): ReadWhen {
  const shown = words.slice(0, 4).join(' ');
  let spec: ScheduleSpec;
  let used: number;
  const interval = intervalOf(words, 0);
  if (interval) {
    spec = { kind: 'interval', seconds: interval.seconds };
    used = interval.used;
  } else {
    const days = daysOf(words, 0) ?? (timeOf(words[0]) ? { days: DAY_SETS.day as number[], used: 0 } : undefined);
    if (!days) throw invalid(field, shown, EVERY_HINT);
    used = days.used;
    if (words[used]?.toLowerCase() === 'at') used++;
    const time = timeOf(words[used]);
    if (!time) throw invalid(field, shown, 'at what time? e.g. "weekday at 09:00"');
    used++;
    spec = { kind: 'weekly', days: days.days, time };
  }
  if (spec.kind === 'interval' && (spec.seconds < 1 || spec.seconds > 366 * 86_400))
    throw invalid(field, shown, 'an interval is between 1 second and 366 days');
  const named = zoneAt(words, used);
  return { spec, zone: named ?? zone, used: used + (named ? 1 : 0) };
}

/** Read `/at`'s moment from the start of `words`, after `now` (ms); `zone`: the person's. */
export function readAt(words: string[], zone: string, now: number, field = 'at'): ReadWhen {
  const shown = words.slice(0, 3).join(' ');
  const first = words[0] ?? '';
  const relative = /^\+(\d{1,7})([a-z]+)$/i.exec(first);
  if (relative) {
    const unit = own(UNITS, (relative[2] as string).toLowerCase());
    if (!unit) throw invalid(field, shown, AT_HINT);
    const seconds = Number(relative[1]) * unit;
    if (seconds < 1 || seconds > 366 * 86_400) throw invalid(field, shown, 'a time from now is between 1 second and 366 days');
    return {
      spec: { kind: 'once', at: new Date(now + seconds * 1000).toISOString() },
      zone: zoneAt(words, 1) ?? zone,
      used: zoneAt(words, 1) ? 2 : 1,
    };
  }
  // A full ISO time with its own offset names its instant; the zone only shows it.
  if (/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/.test(first)) {
    const named = zoneAt(words, 1);
    return finish({ kind: 'once', at: new Date(Date.parse(first)).toISOString() }, named ?? zone, named ? 2 : 1);
  }
  let used = 0;
  let date: { year: number; month: number; day: number } | undefined;
  let weekday: number | undefined;
  let time: string | undefined;
  const dated = /^(\d{4})-(\d\d)-(\d\d)(?:T(\d\d:\d\d))?$/.exec(first);
  const lower = first.toLowerCase();
  if (dated) {
    date = { year: Number(dated[1]), month: Number(dated[2]), day: Number(dated[3]) };
    time = dated[4];
    used = 1;
  } else if (lower === 'today' || lower === 'tomorrow' || own(DAY_WORDS, lower) !== undefined) {
    weekday = lower === 'today' ? -1 : lower === 'tomorrow' ? -2 : own(DAY_WORDS, lower);
    used = 1;
  }
  if (time === undefined) {
    if (words[used]?.toLowerCase() === 'at') used++;
    time = timeOf(words[used]);
    if (!time) throw invalid(field, shown, AT_HINT);
    used++;
  }
  const named = zoneAt(words, used);
  const z = named ?? zone;
  used += named ? 1 : 0;
  const [hour, minute] = time.split(':').map(Number) as [number, number];
  const today = localTimeOf(now, z);
  if (date) {
    const check = addDays(date, 0);
    if (check.month !== date.month || check.day !== date.day) throw invalid(field, shown, 'no such date');
    return finish({ kind: 'once', at: new Date(instantOf({ ...date, hour, minute }, z)).toISOString() }, z, used);
  }
  // A day name: its next one (today only if the time is still to come); a bare time: today, else tomorrow.
  for (let i = weekday === -2 ? 1 : 0; i < 8; i++) {
    const day = addDays(today, i);
    if (weekday !== undefined && weekday >= 0 && day.weekday !== weekday) continue;
    const at = instantOf({ ...day, hour, minute }, z);
    if (at > now) return finish({ kind: 'once', at: new Date(at).toISOString() }, z, used);
    if (weekday === -1 || weekday === -2) break;
  }
  throw invalid(field, shown, 'that time has passed');

  function finish(spec: ScheduleSpec, zone: string, used: number): ReadWhen {
    if (spec.kind === 'once' && Date.parse(spec.at) <= now) throw invalid(field, shown, 'that time has passed');
    if (spec.kind === 'once' && Date.parse(spec.at) > now + 366 * 86_400_000) throw invalid(field, shown, 'at most 366 days ahead');
    return { spec, zone, used };
  }
}

/**
 * The first time strictly after `after` (ms) the schedule runs, or undefined when it never runs
 * again (a `once` that has passed). `anchor`: when an interval started counting (its creation).
 */
export function nextRun(spec: ScheduleSpec, zone: string, after: number, anchor: number): number | undefined {
  if (spec.kind === 'once') {
    const at = Date.parse(spec.at);
    return at > after ? at : undefined;
  }
  if (spec.kind === 'interval') {
    const period = spec.seconds * 1000;
    return anchor + Math.max(1, Math.floor((after - anchor) / period) + 1) * period;
  }
  const [hour, minute] = spec.time.split(':').map(Number) as [number, number];
  const start = localTimeOf(after, zone);
  // Eight days cover every weekly set, the first day too when its time is still to come.
  for (let i = 0; i <= 8; i++) {
    const day = addDays(start, i);
    if (!spec.days.includes(day.weekday)) continue;
    const at = instantOf({ ...day, hour, minute }, zone);
    if (at > after) return at;
  }
  return undefined;
}

/** The shortest time between two runs (for the minimum interval bound); a `once` has none. */
export function shortestGapSeconds(spec: ScheduleSpec): number | undefined {
  if (spec.kind === 'interval') return spec.seconds;
  if (spec.kind === 'weekly') return spec.days.length === 7 ? 86_400 - 3600 : 86_400; // a DST night may shorten a day by an hour
  return undefined;
}

const DAY_LABELS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

function daysLabel(days: number[]): string {
  const key = days.join(',');
  if (key === '0,1,2,3,4,5,6') return 'day';
  if (key === '1,2,3,4,5') return 'weekday';
  if (key === '0,6') return 'weekend day';
  const names = days.map((d) => DAY_LABELS[d] as string);
  return names.length === 1 ? (names[0] as string) : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}

function durationLabel(seconds: number): string {
  for (const [unit, size] of [
    ['day', 86_400],
    ['hour', 3600],
    ['minute', 60],
  ] as const) {
    if (seconds % size === 0) return seconds === size ? unit : `${seconds / size} ${unit}s`;
  }
  return seconds === 1 ? 'second' : `${seconds} seconds`;
}

/** In words: "every weekday at 09:00 Europe/Berlin", "every 2 hours", "once, Mon 30 Nov 09:00 Europe/Berlin". */
export function describeSpec(spec: ScheduleSpec, zone: string, now?: number): string {
  if (spec.kind === 'interval') return `every ${durationLabel(spec.seconds)}`;
  if (spec.kind === 'weekly') return `every ${daysLabel(spec.days)} at ${spec.time} ${zone}`;
  return `once, ${shortTime(Date.parse(spec.at), zone, now)} ${zone}`;
}
