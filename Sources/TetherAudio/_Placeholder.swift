public enum TetherPlaceholderAudio {}
