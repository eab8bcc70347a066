"""Stage 1-2 input side: find files (discover, archives), read them safely (textio), and facts about the bundle."""
