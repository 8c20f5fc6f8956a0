// Small progressive enhancements for the portal; every page works without them.
// - forms with data-confirm ask before submitting (cancel);
// - the "Follow live" logs button streams new lines over server-sent events;
// - a request form that came back with errors moves focus to its error summary;
// - copy buttons copy a token or value to the clipboard.
(function () {
  "use strict";

  // Copy buttons: data-copy names the element whose text goes to the clipboard.
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
    if (!button) {
      return;
    }
    var source = document.getElementById(button.dataset.copy);
    var status = document.getElementById(button.dataset.copy + "-copied");
    if (!source || !navigator.clipboard) {
      if (status) {
        status.textContent = "Select the text and copy it with your keyboard.";
      }
      return;
    }
    navigator.clipboard.writeText(source.textContent.trim()).then(
      function () {
        if (status) {
          status.textContent = "Copied to the clipboard.";
        }
      },
      function () {
        if (status) {
          status.textContent = "Copying was refused: select the text and copy it yourself.";
        }
      }
    );
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });

  function focusErrors() {
    var summary = document.getElementById("error-summary");
    if (summary) {
      summary.focus();
    }
  }

  var source = null;

  function stopFollowing(button, message) {
    if (source) {
      source.close();
      source = null;
    }
    button.setAttribute("aria-pressed", "false");
    button.textContent = "Follow live";
    if (message) {
      document.getElementById("logs-status").textContent = message;
    }
  }

  function output() {
    var pre = document.getElementById("logs-output");
    if (!pre) {
      var logs = document.getElementById("logs");
      logs.textContent = "";
      pre = document.createElement("pre");
      pre.id = "logs-output";
      pre.className = "logs";
      pre.tabIndex = 0;
      pre.setAttribute("aria-label", "Log lines");
      logs.appendChild(pre);
    }
    pre.hidden = false;
    return pre;
  }

  function startFollowing(button) {
    var pre = output();
    pre.textContent = "";
    var status = document.getElementById("logs-status");
    status.textContent = "Following: new lines appear as they are written.";
    button.setAttribute("aria-pressed", "true");
    button.textContent = "Stop following";
    source = new EventSource(button.dataset.streamUrl);
    source.addEventListener("line", function (event) {
      var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.appendChild(document.createTextNode(JSON.parse(event.data) + "\n"));
      if (atBottom) {
        pre.scrollTop = pre.scrollHeight;
      }
    });
    source.addEventListener("unavailable", function (event) {
      stopFollowing(button, JSON.parse(event.data));
    });
    source.addEventListener("end", function (event) {
      stopFollowing(button, JSON.parse(event.data));
    });
    source.onerror = function () {
      stopFollowing(button, "The log stream was interrupted.");
    };
  }

  function setUpLogs() {
    var button = document.getElementById("logs-follow");
    if (!button || !window.EventSource) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      if (source) {
        stopFollowing(button, "Stopped following.");
      } else {
        startFollowing(button);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    focusErrors();
    setUpLogs();
  });
})();
