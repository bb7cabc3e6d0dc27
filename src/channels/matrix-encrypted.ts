import fs from 'node:fs';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * Encrypted rooms: berth holds no Matrix keys, so it cannot read what is written there (Element
 * encrypts new DMs by default). Such a room is told so once, in plain words; the rooms told are
 * kept in a file so a restart does not tell them again.
 */
export const ENCRYPTED_ROOM_NOTICE =
  'berth: this room is end-to-end encrypted, and this bot cannot read encrypted messages: nothing written here reaches it. ' +
  'To talk to it, start a new room with encryption turned off (in Element: create the room and turn off "Enable end-to-end encryption"; ' +
  'encryption cannot be turned off in a room that has it).';

/** Rooms remembered at most (the oldest told is forgotten first). */
const MAX_ROOMS = 10_000;

export interface ToldRooms {
  has(room: string): boolean;
  /** Remember a room as told (written at once). */
  add(room: string): void;
  /** Forget one whose notice could not be sent: the next encrypted event tries again. */
  delete(room: string): void;
}

export function toldRooms(file: string): ToldRooms {
  const told = new Set<string>();
  try {
    for (const line of fs.readFileSync(file, 'utf8').split('\n').slice(-MAX_ROOMS)) if (line.startsWith('!')) told.add(line);
  } catch {
    // none told yet
  }
  const save = () => atomicWriteFile(file, [...told].map((r) => `${r}\n`).join(''));
  return {
    has: (room) => told.has(room),
    add(room) {
      if (/\s/.test(room)) return; // one room a line: a room id never holds a space, so a malformed one is not kept
      told.add(room);
      for (const oldest of told) {
        if (told.size <= MAX_ROOMS) break;
        told.delete(oldest);
      }
      save();
    },
    delete(room) {
      if (told.delete(room)) save();
    },
  };
}

/** Someone else's encrypted message: berth cannot read it. */
export const isEncryptedMessage = (event: unknown, bot: string): boolean => {
  const e = event as { type?: unknown; sender?: unknown } | null | undefined;
  return e?.type === 'm.room.encrypted' && e.sender !== bot;
};
