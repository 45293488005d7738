// SPDX-License-Identifier: MIT
// Validates speedscope JSON files against the file-format schema that the speedscope npm package
// ships (dist/release/file-format-schema.json), with ajv. Also checks what the schema cannot say:
// every frame index of every sample is within shared.frames, and samples and weights have the
// same length. Usage: node validate-speedscope.js FILE...  Exit 0 if all are valid, 1 if not
// (the errors on stderr), 2 on a usage or setup error.
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv = require('ajv');

const schemaPath = path.join(__dirname, 'node_modules', 'speedscope', 'dist', 'release',
  'file-format-schema.json');
if (process.argv.length < 3) {
  console.error('usage: node validate-speedscope.js FILE...');
  process.exit(2);
}
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
const { validateFiles } = require('./validate-schema');

// What the schema cannot say: frame indexes within shared.frames, as many weights as samples.
function crossChecks(doc) {
  const errors = [];
  const nframes = doc.shared.frames.length;
  doc.profiles.forEach((p, i) => {
    if (p.type !== 'sampled') return;
    if (p.samples.length !== p.weights.length)
      errors.push(`profiles[${i}]: ${p.samples.length} samples but ${p.weights.length} weights`);
    p.samples.forEach((s, j) => {
      for (const f of s)
        if (!Number.isInteger(f) || f < 0 || f >= nframes) {
          errors.push(`profiles[${i}].samples[${j}]: frame ${f} not in shared.frames`);
          break;
        }
    });
  });
  return errors;
}

process.exit(validateFiles(validate, process.argv.slice(2), crossChecks) ? 1 : 0);
