import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applySpacingRule, computeAge, formatDisplayValue, todayIn } from './patient-display.ts';

describe('applySpacingRule and formatDisplayValue', () => {
  it('lays the value out by the rule and appends leftovers after one space', () => {
    assert.equal(applySpacingRule('4505577104', '### ### ####'), '450 557 7104');
    assert.equal(applySpacingRule('450557710499', '### ### ####'), '450 557 7104 99');
    assert.equal(applySpacingRule('45055', '### ### ####'), '450 55');
    assert.equal(applySpacingRule('4505577104', null), '4505577104');
  });

  it('adds the display prefix and suffix', () => {
    assert.equal(
      formatDisplayValue('4505577104', {
        valueDisplayPrefix: 'NHS ',
        spacingRule: '### ### ####',
        valueDisplaySuffix: ' (v)',
      }),
      'NHS 450 557 7104 (v)',
    );
  });
});

describe('computeAge', () => {
  const today = '2024-06-15';
  it('counts whole years, a birthday counting from that day', () => {
    assert.equal(computeAge({ dob: '1980-06-15', dateOfDeath: null, isDeceased: false }, today), '44');
    assert.equal(computeAge({ dob: '1980-06-16', dateOfDeath: null, isDeceased: false }, today), '43');
  });

  it('answers Deceased, Unknown, and the age at death when death is recorded but not flagged', () => {
    assert.equal(computeAge({ dob: '1980-01-01', dateOfDeath: null, isDeceased: true }, today), 'Deceased');
    assert.equal(computeAge({ dob: null, dateOfDeath: null, isDeceased: false }, today), 'Unknown');
    assert.equal(
      computeAge({ dob: '1980-01-01', dateOfDeath: '2000-01-01', isDeceased: false }, today),
      '20',
    );
    assert.equal(computeAge({ dob: '2030-01-01', dateOfDeath: null, isDeceased: false }, today), '0');
  });

  it('takes today in the configured time zone', () => {
    const now = new Date('2024-06-15T23:30:00Z');
    assert.equal(todayIn('UTC', now), '2024-06-15');
    assert.equal(todayIn('Pacific/Auckland', now), '2024-06-16');
  });

  it('moves to the next date at local midnight, also in a zone 45 minutes off the hour', () => {
    // Asia/Kathmandu is UTC+05:45: local midnight is 18:15 UTC.
    assert.equal(todayIn('Asia/Kathmandu', new Date('2024-06-15T18:14:00Z')), '2024-06-15');
    assert.equal(todayIn('Asia/Kathmandu', new Date('2024-06-15T18:14:59.999Z')), '2024-06-15');
    assert.equal(todayIn('Asia/Kathmandu', new Date('2024-06-15T18:15:00Z')), '2024-06-16');
    // Back to an earlier minute: the answer is that minute's, not the last one computed.
    assert.equal(todayIn('Asia/Kathmandu', new Date('2024-06-15T18:14:30Z')), '2024-06-15');
    assert.equal(todayIn('Europe/London', new Date('2024-06-15T22:59:59Z')), '2024-06-15');
    assert.equal(todayIn('Europe/London', new Date('2024-06-15T23:00:00Z')), '2024-06-16');
  });
});
