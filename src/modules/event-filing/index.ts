/**
 * Event filing: the one way an event is created (episode, event row, subtype, attachment element,
 * institution, date as stored), used by generic attachment filing, device filing, biometry and the PAS's
 * Did Not Attend. The writer of `event` and `episode` rows for them all, and of `event_subtype_item`.
 */
export type { CreatedEvent, EventDate, EventWriter, NewEvent } from './event-filing.ts';
export {
  ATTACHMENT_ELEMENT_CLASSES,
  chooseEpisode,
  createEvent,
  ensureAttachmentElement,
  findInstitutionId,
  storedDateOf,
  storedEventDate,
  touchEvent,
} from './event-filing.ts';
