public enum TetherPlaceholder {}
