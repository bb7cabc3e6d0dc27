import { preview } from './reply-words.js';

/**
 * A scheduled run's message in a chat's inbox: its id is its firing's ("schedule:<schedule>.<due
 * ms>", store/schedules.ts), so the inbox's deduplication is what keeps a firing from running
 * twice, and the core knows it (after a restart too) by its id alone.
 */
export interface ScheduledMessage {
  id: string;
  chat: string;
  sender: string;
  tenant: string;
  text: string;
  session?: string;
}

const PREFIX = 'schedule:';

/** The inbox id of a firing. */
export const scheduledMessageId = (firingKey: string) => `${PREFIX}${firingKey}`;

/** The schedule a message is a firing of, or undefined for a person's own message. */
export function scheduleOfMessage(id: string): string | undefined {
  const m = /^schedule:(s[0-9a-f]{8})\.\d+$/.exec(id);
  return m ? m[1] : undefined;
}

/** The answer as the chat reads it: marked as the schedule's, so nobody takes it for a reply to their last message. */
export function scheduledReply(schedule: string, task: string, reply: string): string {
  return `[scheduled ${schedule}: ${preview(task)}]\n${reply}`;
}
