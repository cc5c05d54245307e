// Manual crop of a failed signature capture (loaded only on that page, after cropper.min.js).
// The 16:9 box of the original crop screen; on submit the cropped PNG goes into the form as a data URL.
'use strict';
document.addEventListener('DOMContentLoaded', function () {
  var image = document.getElementById('crop-image');
  var form = document.getElementById('crop-form');
  var field = document.getElementById('crop-data');
  if (!image || !form || !field || typeof window.Cropper !== 'function') return;
  var cropper = null;
  function start() {
    cropper = new window.Cropper(image, {
      aspectRatio: 16 / 9,
      viewMode: 1,
      autoCropArea: 0.8,
      // No re-download of the image to read EXIF orientation, no cross-origin tricks: the capture is
      // served by this console as it was stored.
      checkOrientation: false,
      checkCrossOrigin: false,
      zoomOnWheel: false,
    });
  }
  // The original is fetched once and shown from a blob: URL, which Cropper.js's copy of the image reuses
  // (with the page's URL it fetches the capture a second time, and a failure of that second fetch left
  // the crop box hidden for good). A failed fetch is tried twice more, then said.
  var status = document.getElementById('crop-status');
  function say(text) {
    if (status) status.textContent = text;
  }
  function load(attempt) {
    fetch(image.getAttribute('data-src'), { credentials: 'same-origin', cache: 'no-store' })
      .then(function (response) {
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.blob();
      })
      .then(function (blob) {
        image.addEventListener('load', function () {
          say('');
          start();
        });
        image.src = URL.createObjectURL(blob);
      })
      .catch(function () {
        if (attempt < 3) setTimeout(load, 1000 * attempt, attempt + 1);
        else say('The original capture could not be loaded: reload the page to try again.');
      });
  }
  load(1);
  form.addEventListener('submit', function () {
    if (!cropper) return;
    var canvas = cropper.getCroppedCanvas({ maxWidth: 1600, maxHeight: 900, fillColor: '#ffffff' });
    if (canvas) field.value = canvas.toDataURL('image/png');
  });
});
