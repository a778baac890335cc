//! Keeping the shape of a URL's path whatever its placeholders hold.
//!
//! Percent-encoding keeps a value inside one path segment, but `.` and `..`
//! are unreserved characters: a value of `..` in
//! `/api/drafts/{{input.json.id}}/publish` leaves the URL `/api/drafts/../publish`,
//! which the client (or the server, or a proxy between them) resolves to
//! `/api/publish` — the request, with whatever Secret its step binds, goes to
//! another endpoint than the one the flow names. Servers and proxies differ
//! in how often they decode `%XX` before they resolve dots, so a segment is
//! read the way the most credulous of them would: decoded again and again
//! until nothing changes, with `/` and `\` taken as separators.

use std::ops::Range;

/// Where the path of `url` lies (a byte range), given a rendered URL whose
/// placeholder values are already percent-encoded: the path starts after
/// `scheme://authority` and ends at the first `?` or `#`. A URL without
/// `://` (which no http request can use) is taken as all path.
fn path_range(url: &str) -> Range<usize> {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let start = match url[..end].find("://") {
        Some(scheme_end) => {
            let authority = scheme_end + 3;
            url[authority..end]
                .find('/')
                .map_or(end, |slash| authority + slash)
        }
        None => 0,
    };
    start..end
}

/// `%XX` sequences decoded once; anything else, including a `%` not followed
/// by two hex digits, is copied.
fn decode_once(bytes: &[u8]) -> Vec<u8> {
    fn hex(b: u8) -> Option<u8> {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// Whether `segment`, decoded until nothing changes, holds a `.` or `..`
/// between separators. Each decoding that changes anything shortens the
/// text, so the loop ends.
fn holds_dot_segment(segment: &str) -> bool {
    let is_dots = |piece: &[u8]| piece == b"." || piece == b"..";
    let mut text = segment.as_bytes().to_vec();
    loop {
        if text.split(|&b| b == b'/' || b == b'\\').any(is_dots) {
            return true;
        }
        let next = decode_once(&text);
        if next == text {
            return false;
        }
        text = next;
    }
}

/// The first placeholder (its index, from `holes`: the byte range each
/// inserted value took in `url`, in order) whose path segment reads as `.` or
/// `..`. Segments holding no placeholder are the author's own text and are
/// left as written.
pub(crate) fn first_dot_segment(url: &str, holes: &[(Range<usize>, usize)]) -> Option<usize> {
    let path = path_range(url);
    let mut start = path.start;
    for piece in url[path.clone()].split('/') {
        let segment = start..start + piece.len();
        start = segment.end + 1;
        // An empty value makes an empty range: it still stands in the segment
        // it was inserted into.
        let inside = holes
            .iter()
            .find(|(range, _)| range.start >= segment.start && range.end <= segment.end);
        if let Some(&(_, index)) = inside
            && holds_dot_segment(piece)
        {
            return Some(index);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_lies_between_the_authority_and_the_query() {
        let url = "https://h.example:8080/a/b?c=/d#/e";
        assert_eq!(&url[path_range(url)], "/a/b");
        assert_eq!(
            &"https://h.example?x=/y"[path_range("https://h.example?x=/y")],
            ""
        );
        assert_eq!(&"a/../b"[path_range("a/../b")], "a/../b");
    }

    #[test]
    fn dots_are_found_however_often_they_are_encoded() {
        for dots in [
            ".",
            "..",
            "%2e",
            "%2E%2e",
            ".%2E",
            "%252e%252E",
            "%25252e",
            "x/..",
            "..\\x",
            "x%2F..",
        ] {
            assert!(holds_dot_segment(dots), "{dots}");
        }
        for fine in [
            "...",
            "a..",
            "..a",
            ".json",
            "%2e%2e%2e",
            "%2",
            "%zz",
            "",
            "a.b",
        ] {
            assert!(!holds_dot_segment(fine), "{fine}");
        }
    }

    #[test]
    fn only_segments_with_a_placeholder_count() {
        // `/a/../{value}` with the value `x`: the author wrote the dots.
        let url = "https://h/a/../x";
        assert_eq!(first_dot_segment(url, &[(15..16, 0)]), None);
        // The value `..` in the path.
        let url = "https://h/a/../x";
        assert_eq!(first_dot_segment(url, &[(12..14, 3)]), Some(3));
        // The value `..` in the query is not a path segment.
        let url = "https://h/a?q=..";
        assert_eq!(first_dot_segment(url, &[(14..16, 0)]), None);
        // A literal `.` next to a value `.`.
        let url = "https://h/a/../x";
        assert_eq!(first_dot_segment(url, &[(13..14, 1)]), Some(1));
    }
}
