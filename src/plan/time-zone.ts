import { BerthError } from '../base/errors.js';

/**
 * Wall-clock time in an IANA time zone, by Node's Intl alone (no time zone library): a zone's
 * offset at an instant, and the instant of a local date and time. A local time that does not
 * exist (the spring-forward gap) is moved on by the gap (02:30 → 03:30), one that exists twice
 * (fall back) is the earlier of the two: Temporal's "compatible" rule, so a daily time happens
 * exactly once each day.
 */
export interface LocalTime {
  year: number;
  /** 1-12 */
  month: number;
  day: number;
  hour: number;
  minute: number;
  /** 0 = Sunday … 6 = Saturday */
  weekday: number;
}

const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/;
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      weekday: 'short',
    });
    if (formatters.size < 512) formatters.set(zone, f);
  }
  return f;
}

/** The zone's canonical name, or undefined when it is not an IANA zone this Node knows. */
export function zoneNameOf(name: string): string | undefined {
  if (name.length > 64 || !ZONE_NAME.test(name)) return undefined;
  try {
    return formatterOf(name).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** The zone's canonical name; a name it is not is refused with the field at fault. */
export function checkZone(name: string, field = 'tz'): string {
  const zone = zoneNameOf(name);
  if (!zone)
    throw new BerthError('CONFIG_INVALID', `"${name.slice(0, 64)}" is not a time zone`, {
      issues: [{ field, reason: 'must be an IANA time zone such as Europe/Berlin, America/New_York or UTC' }],
    });
  return zone;
}

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

/** The wall clock in `zone` at `ms` (seconds dropped). */
export function localTimeOf(ms: number, zone: string): LocalTime {
  const parts: Record<string, string> = {};
  for (const p of formatterOf(zone).formatToParts(new Date(ms))) parts[p.type] = p.value;
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    hour: Number(parts.hour),
    minute: Number(parts.minute),
    weekday: WEEKDAYS[parts.weekday ?? 'Sun'] ?? 0,
  };
}

/** The zone's offset from UTC at `ms`, in ms (Berlin in winter: +3_600_000). */
export function offsetAt(ms: number, zone: string): number {
  const floored = Math.floor(ms / 60_000) * 60_000;
  const t = localTimeOf(floored, zone);
  return Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute) - floored;
}

/** The instant of a local date and time in `zone` (gap: moved on by it; repeated: the earlier). */
export function instantOf(local: Omit<LocalTime, 'weekday'>, zone: string): number {
  const wall = Date.UTC(local.year, local.month - 1, local.day, local.hour, local.minute);
  const before = offsetAt(wall - 86_400_000, zone);
  const after = offsetAt(wall + 86_400_000, zone);
  const valid = [wall - before, wall - after].filter((i) => offsetAt(i, zone) === wall - i);
  if (valid.length) return Math.min(...valid);
  return wall - before; // in the gap: the offset before it carries the time past it
}

/** The local date `days` after the given one (calendar arithmetic, no zone). */
export function addDays(
  date: { year: number; month: number; day: number },
  days: number,
): { year: number; month: number; day: number; weekday: number } {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate(), weekday: d.getUTCDay() };
}

const DAY_NAMES = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTH_NAMES = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** "Mon 30 Nov 09:00" in `zone`; the year too when it is not the one of `now`. */
export function shortTime(ms: number, zone: string, now?: number): string {
  const t = localTimeOf(ms, zone);
  const year = now !== undefined && localTimeOf(now, zone).year !== t.year ? ` ${t.year}` : '';
  return `${DAY_NAMES[t.weekday]} ${t.day} ${MONTH_NAMES[t.month - 1]}${year} ${pad(t.hour)}:${pad(t.minute)}`;
}

export const pad = (n: number) => String(n).padStart(2, '0');
