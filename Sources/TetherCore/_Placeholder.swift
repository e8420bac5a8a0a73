public enum TetherPlaceholderCore {}
